"""Upstream faults, end to end: a real `gateway serve` process in front of misbehaving
upstreams (tests/e2e/fake_upstreams.py).

Every fault must come back to the client as a prompt JSON-RPC error in the
client's own revision (never a hang), and must not hurt anything else: the
gateway process stays up, `/healthz` answers, a well-behaved route beside the
bad one keeps working, and so do other calls on the bad route that the fault
does not touch.  Every wait is bounded; nothing sleeps to synchronise.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.e2e.fake_client import (
    WAIT,
    Reply,
    assert_clean_log,
    call_tool_legacy,
    call_tool_modern,
    initialize,
    modern_headers,
    modern_request,
    open_session,
    post,
    request,
    session_headers,
    text_of,
)
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import REPO, RunningGateway, gateway

# A fault must be reported well within this (seconds); the route timeout is far below it.
PROMPT = 5.0
ROUTE_TIMEOUT = 0.5
# Longer: the wedged test tells its events apart by this much (a stalled loop must not
# see the courtesy cancel given up before the answer it came with).
WEDGED_TIMEOUT = 2.0


@contextlib.asynccontextmanager
async def running_gateway(*routes: str, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """`gateway serve` as a subprocess, started and stopped off the event loop so the
    in-process fake upstreams keep serving meanwhile (shutdown ends upstream sessions)."""
    manager = gateway(*routes, tmp_path=tmp_path)
    running = await asyncio.to_thread(manager.__enter__)
    try:
        yield running
        assert running.process.poll() is None, f"the gateway died:\n{running.log()[-4000:]}"
        assert_clean_log(running.log())
    finally:
        await asyncio.to_thread(manager.__exit__, None, None, None)
    assert running.process.returncode == 0, (
        f"the gateway did not shut down cleanly ({running.process.returncode}):\n"
        f"{running.log()[-4000:]}"
    )


@contextlib.asynccontextmanager
async def fakes(*behaviours: str, stateless: bool = False) -> AsyncIterator[list[FakeUpstream]]:
    """``stateless``: the first (the misbehaving one) as a 2026-07-28 server."""
    started = [FakeUpstream(b, stateless=stateless and not n) for n, b in enumerate(behaviours)]
    try:
        for fake in started:
            await fake.start()
        yield started
    finally:
        for fake in started:
            await fake.stop()


def assert_upstream_error(reply: Reply, id_: Any, *fragments: str) -> str:
    """A JSON-RPC error for ``id_`` (internal error, as every revision words upstream
    trouble) whose message says what went wrong; returns the message."""
    assert reply.status in (200, 502, 503, 504), reply.text
    message = reply.message
    assert message.get("jsonrpc") == "2.0", message
    assert message.get("id") == id_, message
    assert "result" not in message, message
    error = reply.error
    assert error["code"] == -32603, error
    text = str(error.get("message", ""))
    assert any(f.lower() in text.lower() for f in fragments), (
        f"the error does not say what went wrong (wanted one of {fragments}): {text!r}"
    )
    return text


async def assert_unaffected(http: aiohttp.ClientSession, gw: RunningGateway) -> None:
    """The process is alive, /healthz answers, the good route serves both eras."""
    assert gw.process.poll() is None, f"the gateway died:\n{gw.log()[-4000:]}"
    async with asyncio.timeout(WAIT):
        async with http.get(gw.url("/healthz")) as response:
            assert response.status == 200
            assert (await response.json())["status"] == "ok"
    good = gw.url("/good")
    session_id = await open_session(http, good)
    reply = await call_tool_legacy(http, good, session_id, "echo", {"text": "fine"}, id_=1)
    assert text_of(reply.result) == "echo: fine"
    reply = await call_tool_modern(http, good, "echo", {"text": "fine too"}, id_=1)
    assert reply.result["resultType"] == "complete"
    assert text_of(reply.result) == "echo: fine too"


async def list_tools_legacy(http: aiohttp.ClientSession, url: str, session_id: str) -> Reply:
    return await post(http, url, request(2, "tools/list"), session_headers(session_id))


# --------------------------------------------------------------------------- refused


async def test_an_unreachable_upstream_is_a_prompt_error(
    http: aiohttp.ClientSession, tmp_path: Path, dead_url: str
) -> None:
    nothing = dead_url  # nothing listens there
    async with (
        fakes("ok") as (good,),
        running_gateway(f"/bad={nothing}", f"/good={good.url}", tmp_path=tmp_path) as gw,
    ):
        bad = gw.url("/bad")
        started = time.monotonic()
        # A legacy client: its very handshake needs the upstream.
        reply = await post(http, bad, initialize("init"), within=PROMPT)
        assert_upstream_error(reply, "init", "could not be reached")
        # A modern client: discovery and a call.
        body = modern_request(3, "server/discover")
        reply = await post(http, bad, body, modern_headers("server/discover"), within=PROMPT)
        assert_upstream_error(reply, 3, "could not be reached")
        reply = await call_tool_modern(http, bad, "echo", {"text": "x"}, id_=4, within=PROMPT)
        assert_upstream_error(reply, 4, "could not be reached")
        assert time.monotonic() - started < PROMPT
        await assert_unaffected(http, gw)


async def test_a_failed_initialize_mints_no_session(
    http: aiohttp.ClientSession, tmp_path: Path, dead_url: str
) -> None:
    nothing = dead_url
    async with (
        fakes("ok") as (good,),
        running_gateway(f"/bad={nothing}", f"/good={good.url}", tmp_path=tmp_path) as gw,
    ):
        reply = await post(http, gw.url("/bad"), initialize(1), within=PROMPT)
        assert_upstream_error(reply, 1, "could not be reached")
        assert reply.session_id is None, "an initialize that failed handed out a session id"


# --------------------------------------------------------------------------- slow


@pytest.mark.parametrize("behaviour", ["hang", "hang_sse"])
@pytest.mark.parametrize("stateless", [False, True], ids=["handshake-era", "stateless"])
async def test_a_slow_upstream_times_out(
    http: aiohttp.ClientSession, tmp_path: Path, behaviour: str, stateless: bool
) -> None:
    async with (
        fakes(behaviour, "ok", stateless=stateless) as (slow, good),
        running_gateway(
            f"/bad={slow.url},timeout={ROUTE_TIMEOUT}", f"/good={good.url}", tmp_path=tmp_path
        ) as gw,
    ):
        bad = gw.url("/bad")
        session_id = await open_session(http, bad)
        started = time.monotonic()
        stuck = asyncio.create_task(
            call_tool_legacy(http, bad, session_id, "echo", {"text": "x"}, id_=9, within=PROMPT)
        )
        await asyncio.wait_for(slow.call_started.wait(), WAIT)
        # While that call hangs upstream: another client on the same route and the
        # good route are served.
        other = await open_session(http, bad)
        listed = await list_tools_legacy(http, bad, other)
        assert [t["name"] for t in listed.result["tools"]] == ["echo"]
        await assert_unaffected(http, gw)

        reply = await stuck
        elapsed = time.monotonic() - started
        assert_upstream_error(reply, 9, "did not answer in time", "timed out")
        # Not before the timeout (a lower bound: a busy machine only makes it later; the
        # upper one is the client's own `within`).
        assert elapsed >= ROUTE_TIMEOUT, elapsed

        # A modern client meets the same timeout, in its own revision.
        reply = await call_tool_modern(http, bad, "echo", {"text": "y"}, id_="m", within=PROMPT)
        assert_upstream_error(reply, "m", "did not answer in time", "timed out")
        assert slow.calls == 2
        if not stateless:  # (a stateless server is told by its request's end)
            # Each timed-out call was cancelled upstream (notifications/cancelled).
            cancelled = await slow.wait_cancelled(2, WAIT)
            assert len(cancelled) == 2 and len(set(cancelled)) == 2, cancelled
        await assert_unaffected(http, gw)


async def test_a_wedged_upstream_times_out_within_one_timeout(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with (
        fakes("wedged", "ok") as (stuck, good),
        running_gateway(
            f"/bad={stuck.url},timeout={WEDGED_TIMEOUT}", f"/good={good.url}", tmp_path=tmp_path
        ) as gw,
    ):
        bad = gw.url("/bad")
        session_id = await open_session(http, bad)
        reply = await call_tool_legacy(
            http, bad, session_id, "echo", {"text": "x"}, id_=9, within=PROMPT
        )
        # The courtesy notifications/cancelled must not hold the answer for another
        # timeout: when the answer arrives, the gateway has given up on no request but
        # the call itself (the wedged server holds the cancellation's POST, unanswered).
        abandoned_by_then = stuck.abandoned
        assert_upstream_error(reply, 9, "did not answer in time", "timed out")
        assert abandoned_by_then == 0, abandoned_by_then
        assert await stuck.wait_cancelled(1, WAIT)
        # (And the gateway does give up on that POST, in its own time.)
        await assert_unaffected(http, gw)


# --------------------------------------------------------------------------- garbage


@pytest.mark.parametrize(
    ("behaviour", "says"),
    [("garbage", ("not JSON",)), ("html500", ("HTTP 500",))],
)
@pytest.mark.parametrize("stateless", [False, True], ids=["handshake-era", "stateless"])
async def test_a_garbage_answer_is_a_clear_error(
    http: aiohttp.ClientSession,
    tmp_path: Path,
    behaviour: str,
    says: tuple[str, ...],
    stateless: bool,
) -> None:
    async with (
        fakes(behaviour, "ok", stateless=stateless) as (broken, good),
        running_gateway(f"/bad={broken.url}", f"/good={good.url}", tmp_path=tmp_path) as gw,
    ):
        bad = gw.url("/bad")
        session_id = await open_session(http, bad)
        reply = await call_tool_legacy(
            http, bad, session_id, "echo", {"text": "x"}, id_=5, within=PROMPT
        )
        assert_upstream_error(reply, 5, *says)
        reply = await call_tool_modern(http, bad, "echo", {"text": "x"}, id_=6, within=PROMPT)
        assert_upstream_error(reply, 6, *says)
        # The rest of the route still works: the same session lists tools.
        listed = await list_tools_legacy(http, bad, session_id)
        assert [t["name"] for t in listed.result["tools"]] == ["echo"]
        await assert_unaffected(http, gw)


@pytest.mark.parametrize("stateless", [False, True], ids=["handshake-era", "stateless"])
async def test_messages_that_are_not_json_rpc_before_the_answer_are_dropped(
    http: aiohttp.ClientSession, tmp_path: Path, stateless: bool
) -> None:
    """Notifications (and a request) whose method is not a string, on the answer's SSE
    stream: nothing a client can be sent, so dropped; the answer still arrives."""
    async with (
        fakes("odd_sse", "ok", stateless=stateless) as (odd, good),
        running_gateway(f"/odd={odd.url}", f"/good={good.url}", tmp_path=tmp_path) as gw,
    ):
        url = gw.url("/odd")
        session_id = await open_session(http, url)
        reply = await call_tool_legacy(
            http, url, session_id, "echo", {"text": "a"}, id_=5, within=PROMPT
        )
        assert reply.message.get("id") == 5, reply.text
        assert text_of(reply.result) == "echo: a"
        assert [m.get("id") for m in reply.messages] == [5], reply.text
        reply = await call_tool_modern(http, url, "echo", {"text": "b"}, id_=6, within=PROMPT)
        assert reply.result["resultType"] == "complete", reply.text
        assert text_of(reply.result) == "echo: b"
        await assert_unaffected(http, gw)


# --------------------------------------------------------------------------- reset


@pytest.mark.parametrize("stateless", [False, True], ids=["handshake-era", "stateless"])
async def test_a_connection_reset_mid_stream_is_a_clear_error(
    http: aiohttp.ClientSession, tmp_path: Path, stateless: bool
) -> None:
    async with (
        fakes("reset", "ok", stateless=stateless) as (resetting, good),
        running_gateway(f"/bad={resetting.url}", f"/good={good.url}", tmp_path=tmp_path) as gw,
    ):
        bad = gw.url("/bad")
        session_id = await open_session(http, bad)
        reply = await call_tool_legacy(
            http, bad, session_id, "echo", {"text": "x"}, id_=5, within=PROMPT
        )
        # The notification sent before the reset reached the legacy client first.
        assert reply.messages[0].get("method") == "notifications/message", reply.text
        assert_upstream_error(reply, 5, "closed", "reset", "could not be reached")
        reply = await call_tool_modern(http, bad, "echo", {"text": "x"}, id_=6, within=PROMPT)
        assert_upstream_error(reply, 6, "closed", "reset", "could not be reached")
        listed = await list_tools_legacy(http, bad, session_id)
        assert [t["name"] for t in listed.result["tools"]] == ["echo"]
        await assert_unaffected(http, gw)


# --------------------------------------------------------------------------- killed


@contextlib.asynccontextmanager
async def fake_process(behaviour: str, port: int = 0) -> AsyncIterator[tuple[Any, str]]:
    """A fake upstream in its own process (so it can be killed); yields (process, url)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.e2e.fake_upstreams",
        behaviour,
        str(port),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), WAIT)).decode().split()
        assert line[:1] == ["ready"], line
        yield process, line[1]
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(process.wait(), WAIT)


async def test_an_upstream_killed_mid_call(http: aiohttp.ClientSession, tmp_path: Path) -> None:
    async with contextlib.AsyncExitStack() as stack:
        (good,) = await stack.enter_async_context(fakes("ok"))
        process, url = await stack.enter_async_context(fake_process("hang"))
        gw = await stack.enter_async_context(
            running_gateway(f"/bad={url}", f"/good={good.url}", tmp_path=tmp_path)
        )
        bad = gw.url("/bad")
        session_id = await open_session(http, bad)
        stuck = asyncio.create_task(
            call_tool_legacy(http, bad, session_id, "echo", {"text": "x"}, id_=3, within=PROMPT)
        )
        assert process.stdout is not None
        assert await asyncio.wait_for(process.stdout.readline(), WAIT) == b"call\n"
        process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(process.wait(), WAIT)
        reply = await stuck
        assert_upstream_error(reply, 3, "closed", "could not be reached", "reset")
        # While it stays down: prompt errors, for both eras.
        reply = await call_tool_legacy(
            http, bad, session_id, "echo", {"text": "x"}, id_=4, within=PROMPT
        )
        assert_upstream_error(reply, 4, "could not be reached")
        reply = await call_tool_modern(http, bad, "echo", {"text": "x"}, id_=5, within=PROMPT)
        assert_upstream_error(reply, 5, "could not be reached")
        await assert_unaffected(http, gw)

        # It comes back on the same port: the route recovers (a new upstream session).
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        await stack.enter_async_context(fake_process("ok", port))
        reply = await call_tool_legacy(
            http, bad, session_id, "echo", {"text": "back"}, id_=6, within=PROMPT
        )
        assert text_of(reply.result) == "echo: back"
        reply = await call_tool_modern(http, bad, "echo", {"text": "back"}, id_=7, within=PROMPT)
        assert text_of(reply.result) == "echo: back"
