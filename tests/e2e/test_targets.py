"""Several targets per route (issue 40): calls spread over the healthy ones, a stopped
target is passed by, a session stays on its target, every target down is answered at
once in the client's revision, and a target that comes back is taken again.

Real processes: the gateway is `gateway serve` with ``--route /mcp=A,also=B|C``; the
targets are fake MCP servers on loopback ports this test holds (stopped: connections
refused; started again on the same port).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from tests.e2e.fake_client import (
    NEWEST_HANDSHAKE,
    base_headers,
    call_tool_legacy,
    call_tool_modern,
    initialize,
    modern_headers,
    modern_request,
    open_session,
    post,
    text_of,
)
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import REPO, HeldPort
from tests.e2e.test_http_faults import running_gateway

# Each target is checked this often; a refused target is out after 3 failures.
CHECKS = "health_every=0.2"
# An answer while every target is down comes at once: well under this (seconds).
AT_ONCE = 2.0
# Bound on waiting for a target to be seen down or back (checks, back-off of 2 s).
WAIT = 30.0
HANDSHAKE_ERA = ("2024-11-05", "2025-03-26", "2025-06-18", NEWEST_HANDSHAKE)


@contextlib.asynccontextmanager
async def targets(count: int) -> AsyncIterator[list[tuple[FakeUpstream, int]]]:
    """``count`` fake servers, each on a port held for the test (refused while stopped)."""
    held = [HeldPort() for _ in range(count)]
    fakes = [FakeUpstream("ok") for _ in range(count)]
    try:
        for fake, port in zip(fakes, held, strict=True):
            await fake.start(port.port)
        yield [(fake, port.port) for fake, port in zip(fakes, held, strict=True)]
    finally:
        for fake in fakes:
            await fake.stop()
        for port in held:
            port.close()


def route(urls: list[str]) -> str:
    return f"/mcp={urls[0]},also={'|'.join(urls[1:])},{CHECKS}"


async def echo(http: aiohttp.ClientSession, url: str, i: int) -> None:
    reply = await call_tool_modern(http, url, "echo", {"text": f"t{i}"}, id_=i)
    assert reply.status == 200, reply.text
    assert text_of(reply.result) == f"echo: t{i}", reply.message


async def target_states(http: aiohttp.ClientSession, base: str) -> list[str]:
    async with http.get(base + "/readyz") as response:
        body = orjson.loads(await response.read())
    routes = body.get("routes") or {}
    found = routes.get("/mcp", body) if isinstance(routes, dict) else body
    return [row["state"] for row in found.get("targets", [])]


async def until(check: Any, within: float = WAIT) -> None:
    """Poll ``check()`` (a coroutine function returning bool) until true, bounded."""
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, "not reached in time"
        await asyncio.sleep(0.1)


async def test_calls_spread_and_a_stopped_target_is_passed_by(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with targets(3) as found:
        (a, _), (b, _), (c, _) = found
        async with running_gateway(route([a.url, b.url, c.url]), tmp_path=tmp_path) as gw:
            for i in range(9):
                await echo(http, gw.url(), i)
            assert min(a.calls, b.calls, c.calls) >= 1, (a.calls, b.calls, c.calls)
            await a.stop()  # refused from now on
            before = b.calls + c.calls
            for i in range(9, 21):
                await echo(http, gw.url(), i)  # every one answered: none was lost
            assert b.calls + c.calls == before + 12
            await until(lambda: _has(http, gw.base, "ejected"))


async def _has(http: aiohttp.ClientSession, base: str, state: str) -> bool:
    return state in await target_states(http, base)


async def test_a_session_stays_on_its_target(http: aiohttp.ClientSession, tmp_path: Path) -> None:
    async with targets(2) as found:
        (a, _), (b, _) = found
        async with running_gateway(route([a.url, b.url]), tmp_path=tmp_path) as gw:
            for _ in range(2):
                before = (a.calls, b.calls)
                session = await open_session(http, gw.url())
                for i in range(6):
                    reply = await call_tool_legacy(
                        http, gw.url(), session, "echo", {"text": "s"}, id_=i + 1
                    )
                    assert text_of(reply.result) == "echo: s", reply.message
                grew = sorted([a.calls - before[0], b.calls - before[1]])
                assert grew == [0, 6], (before, a.calls, b.calls)


async def test_every_target_down_is_answered_at_once_then_taken_again(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with targets(2) as found:
        (a, port_a), (b, _) = found
        async with running_gateway(route([a.url, b.url]), tmp_path=tmp_path) as gw:
            await echo(http, gw.url(), 1)
            await a.stop()
            await b.stop()
            await until(lambda: _all(http, gw.base, "ejected"))

            started = time.monotonic()
            reply = await call_tool_modern(http, gw.url(), "echo", {"text": "x"}, id_=7)
            assert time.monotonic() - started < AT_ONCE
            assert reply.status == 503, reply.text  # a 2026-07-28 client: the status says it
            assert int(reply.headers["Retry-After"]) >= 1
            assert reply.error["code"] == -32000, reply.message
            assert reply.error["data"]["retryAfterSeconds"] >= 1
            assert "every server of the route is down" in reply.error["message"]
            assert a.url not in reply.text and str(port_a) not in reply.text

            # Handshake-era clients: a JSON-RPC error at HTTP 200 (their SDKs end the
            # whole session on a 5xx), the same code and when to try again.
            for version in HANDSHAKE_ERA:
                started = time.monotonic()
                opened = await post(http, gw.url(), initialize(1, version), base_headers())
                assert time.monotonic() - started < AT_ONCE
                assert opened.status == 200, opened.text
                assert opened.error["code"] == -32000, (version, opened.message)
                assert opened.error["data"]["retryAfterSeconds"] >= 1

            await a.start(port_a)  # back on its port: re-admitted by a check
            await until(lambda: _has(http, gw.base, "up"))
            await echo(http, gw.url(), 8)
            assert a.calls >= 1


async def _all(http: aiohttp.ClientSession, base: str, state: str) -> bool:
    states = await target_states(http, base)
    return bool(states) and all(s == state for s in states)


async def test_a_forgotten_pooled_session_is_opened_again_on_each_target(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """Issue 40, item 6: a stateless client's pooled upstream session that the server
    forgot (restarted, expired it: 404) is opened again without the client noticing,
    on every target."""
    async with targets(2) as found:
        (a, _), (b, _) = found
        async with running_gateway(route([a.url, b.url]), tmp_path=tmp_path) as gw:
            for i in range(4):
                await echo(http, gw.url(), i)
            opened = a.initializes + b.initializes
            a.sessions.clear()  # both servers forget every session
            b.sessions.clear()
            for i in range(4, 8):
                await echo(http, gw.url(), i)  # answered: the client notices nothing
            assert a.initializes + b.initializes > opened


async def test_a_plain_tool_never_reaches_a_second_target_a_safe_one_does(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """Each target cuts the answer of each tool's first run after running it: a safe
    tool's call goes on to the other target once (where its first run is cut too: the
    client hears the failure, and it ran once on each); a plain one ran somewhere, and
    is never sent to a second target (the servers record every run)."""
    async with (
        FakeUpstream("flaky") as a,
        FakeUpstream("flaky") as b,
        running_gateway(route([a.url, b.url]), tmp_path=tmp_path) as gw,
    ):
        listed = await post(
            http, gw.url(), modern_request(1, "tools/list"), modern_headers("tools/list")
        )
        assert "tools" in listed.result
        read = await call_tool_modern(http, gw.url(), "read_it", {}, id_=2)
        assert "error" in read.message, read.message
        assert (a.runs.get("read_it"), b.runs.get("read_it")) == (1, 1)  # once on each
        plain = await call_tool_modern(http, gw.url(), "plain", {}, id_=3)
        assert "error" in plain.message, plain.message
        assert a.runs.get("plain", 0) + b.runs.get("plain", 0) == 1


async def test_a_sigkilled_targets_calls_go_to_the_others(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """The target is a process of its own, killed with SIGKILL between calls."""
    process = subprocess.Popen(  # noqa: ASYNC220 (started once, before any await)
        [sys.executable, "-m", "tests.e2e.fake_upstreams", "ok"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        ready = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), WAIT)
        doomed = ready.decode().split()[1]
        async with (
            FakeUpstream("ok") as other,
            running_gateway(route([doomed, other.url]), tmp_path=tmp_path) as gw,
        ):
            for i in range(4):
                await echo(http, gw.url(), i)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=WAIT)
            before = other.calls
            for i in range(4, 12):
                await echo(http, gw.url(), i)
            assert other.calls == before + 8
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_a_session_whose_target_died_ends_and_its_client_starts_again_elsewhere(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """Issue 47, item 3: a handshake-era session pinned to a target that died was told
    'unreachable, retry' on every call until the target came back. Once its target is
    out the session is over (HTTP 404, as the revision says an ended session is), and
    the client's next initialize lands on a live target; a stateless client's calls
    go on on the live one."""
    async with targets(2) as found:
        (a, _), (b, _) = found
        async with running_gateway(route([a.url, b.url]), tmp_path=tmp_path) as gw:
            session = await open_session(http, gw.url())
            first = await call_tool_legacy(http, gw.url(), session, "echo", {"text": "s"}, id_=1)
            assert text_of(first.result) == "echo: s", first.message
            pinned, other = (a, b) if a.calls else (b, a)
            await pinned.stop()
            await until(lambda: _has(http, gw.base, "ejected"))
            ended = await call_tool_legacy(http, gw.url(), session, "echo", {"text": "s"}, id_=2)
            assert ended.status == 404, ended.text
            assert "start a new session" in ended.text
            again = await call_tool_legacy(http, gw.url(), session, "echo", {"text": "s"}, id_=3)
            assert again.status == 404, again.text  # the session is over for good
            fresh = await open_session(http, gw.url())
            reply = await call_tool_legacy(http, gw.url(), fresh, "echo", {"text": "n"}, id_=4)
            assert text_of(reply.result) == "echo: n", reply.message
            await echo(http, gw.url(), 5)  # a stateless client: on the live target
            assert other.calls == 2
