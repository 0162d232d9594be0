"""Rate limits of one `gateway serve` in front of the demo server, spoken by hand: what
counts, per caller and per caller and tool; how a refusal reads on a single POST and
in a batch; a route without limits beside it; the refusals in /metrics.  The rates
are per hour, so nothing refills while a test runs: what is admitted is the burst."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from tests.cluster.conftest import _process, wait_port
from tests.e2e.fake_client import (
    Reply,
    initialize,
    notification,
    post,
    request,
    session_headers,
)
from tests.e2e.gateway_proc import RunningGateway, free_port, gateway

LIMITS = "rate=3/h,burst=3,tool_rate=2/h,tool_burst=2"
ADD = {"a": 1, "b": 2}


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    tmp = tmp_path_factory.mktemp("rate")
    port = free_port()
    argv = [sys.executable, "-m", "gateway", "demo", "--listen", f"127.0.0.1:{port}"]
    with _process(argv, tmp / "demo.log") as demo:
        wait_port(port, 10.0, demo)
        upstream = f"http://127.0.0.1:{port}/mcp"
        with gateway(f"/limited={upstream},{LIMITS}", f"/free={upstream}", tmp_path=tmp) as gw:
            yield gw


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


class Caller:
    """A 2025-06-18 (or 2025-03-26) client with a session and credentials of its own."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        url: str,
        token: str,
        version: str,
        scheme: str = "Bearer",
    ) -> None:
        self.http, self.url, self.version = http, url, version
        self.auth = {"Authorization": f"{scheme} {token}"}
        self.headers: dict[str, str] = {}
        self.ids = 0

    async def open(self) -> Caller:
        reply = await post(
            self.http, self.url, initialize(0, self.version), {**self.auth, **_json()}
        )
        assert reply.status == 200, reply.text
        assert reply.session_id is not None
        self.headers = {**session_headers(reply.session_id, self.version), **self.auth}
        await post(self.http, self.url, notification("notifications/initialized"), self.headers)
        return self

    async def send(self, body: Any) -> Reply:
        return await post(self.http, self.url, body, self.headers)

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        return request(self.ids, method, params)

    async def tool(self, name: str, arguments: dict[str, Any]) -> Reply:
        return await self.send(self.call("tools/call", {"name": name, "arguments": arguments}))


def _json() -> dict[str, str]:
    return {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def assert_limited(reply: Reply, per: str) -> None:
    assert reply.status == 429, reply.text
    after = int(reply.headers["Retry-After"])
    error = reply.error
    assert error["code"] == -32000
    assert error["data"] == {"retryAfterSeconds": after}
    assert f"this caller's calls{per} are limited to" in error["message"], error
    assert after > 60  # a per-hour bucket: minutes, at least


async def test_per_tool_then_per_caller(
    running: RunningGateway, http: aiohttp.ClientSession
) -> None:
    alice = await Caller(http, running.url("/limited"), "alice", "2025-06-18").open()
    for _ in range(2):
        reply = await alice.tool("echo", {"text": "hi"})
        assert reply.status == 200 and reply.result["content"][0]["text"] == "hi", reply.text
    assert_limited(await alice.tool("echo", {"text": "hi"}), " of tool 'echo'")
    # Another tool has a bucket of its own; the caller's own bucket (3) is now spent.
    reply = await alice.tool("add", {"a": 1, "b": 2})
    assert reply.status == 200, reply.text
    assert_limited(await alice.tool("add", {"a": 1, "b": 2}), "")
    assert_limited(await alice.send(alice.call("prompts/get", {"name": "greeting"})), "")
    # What is not limited still goes: lists, pings; so does a new session.
    for _ in range(5):
        reply = await alice.send(alice.call("tools/list", {}))
        assert reply.status == 200 and reply.result["tools"], reply.text
    assert (await alice.send(alice.call("ping", {}))).status == 200
    again = await Caller(http, running.url("/limited"), "alice", "2025-06-18").open()
    assert_limited(await again.tool("add", {"a": 1, "b": 2}), "")
    # Another caller, and the same caller on a route without limits, are unaffected.
    bob = await Caller(http, running.url("/limited"), "bob", "2025-06-18").open()
    assert (await bob.tool("echo", {"text": "hi"})).status == 200
    free = await Caller(http, running.url("/free"), "alice", "2025-06-18").open()
    for _ in range(5):
        assert (await free.tool("echo", {"text": "hi"})).status == 200


async def test_one_token_is_one_caller_however_its_scheme_is_spelled(
    running: RunningGateway, http: aiohttp.ClientSession
) -> None:
    """``bearer``, ``BEARER``, ... name the same caller (the scheme is case-insensitive):
    a session per spelling still shares the one caller's burst of 3."""
    answered = limited = 0
    for scheme in ("Bearer", "bearer", "BEARER", "bEaReR", "BeArEr  "):
        erin = await Caller(http, running.url("/limited"), "erin", "2025-06-18", scheme).open()
        for tool in ("echo", "add"):  # two tools: the caller's bucket (3) is what binds
            reply = await erin.tool(tool, {"text": "hi"} if tool == "echo" else {"a": 1, "b": 2})
            if reply.status == 429:
                assert reply.error["code"] == -32000, reply.text
                limited += 1
            else:
                assert reply.status == 200, reply.text
                answered += 1
    assert (answered, limited) == (3, 7)


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_a_refusal_is_a_plain_json_429_in_every_revision(
    running: RunningGateway, http: aiohttp.ClientSession, version: str
) -> None:
    """Refused before anything went upstream, a call is answered as JSON with its 429
    and Retry-After, also where the revision streams calls that may run long
    (2025-11-25 primes such a stream): never an HTTP 200 stream carrying the error."""
    frank = await Caller(http, running.url("/limited"), f"frank-{version}", version).open()
    for tool, arguments in (("echo", {"text": "x"}), ("echo", {"text": "y"}), ("add", ADD)):
        assert (await frank.tool(tool, arguments)).status == 200
    refused = await frank.tool("add", ADD)
    assert refused.content_type == "application/json", refused.text
    assert_limited(refused, "")


async def test_a_batch_answers_each_refused_call_with_its_error(
    running: RunningGateway, http: aiohttp.ClientSession
) -> None:
    carol = await Caller(http, running.url("/limited"), "carol", "2025-03-26").open()
    batch = [
        carol.call("tools/call", {"name": "add", "arguments": {"a": n, "b": 1}}) for n in range(5)
    ]
    reply = await carol.send(batch)
    assert reply.status == 200, reply.text  # one answer for the batch, an item per call
    (answers,) = reply.messages
    assert sorted(a["id"] for a in answers) == [b["id"] for b in batch]
    done = [a for a in answers if "result" in a]
    refused = [a["error"] for a in answers if "error" in a]
    assert len(done) == 2 and len(refused) == 3  # the tool's burst
    for error in refused:
        assert error["code"] == -32000 and error["data"]["retryAfterSeconds"] > 60, error


async def test_refusals_are_counted_by_route_and_reason(
    running: RunningGateway, http: aiohttp.ClientSession
) -> None:
    dave = await Caller(http, running.url("/limited"), "dave", "2025-06-18").open()
    for _ in range(3):
        await dave.tool("echo", {"text": "x"})
    async with http.get(running.url("/metrics")) as response:
        text = await response.text()
    counted = {
        reason: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("gateway_policy_refusals_total{")
        for reason in ("rate", "tool_rate")
        if f'reason="{reason}"' in line and 'route="/limited"' in line
    }
    assert counted.get("tool_rate", 0) >= 1 and set(counted) <= {"rate", "tool_rate"}, counted
    assert 'route="/free"' not in "".join(
        line for line in text.splitlines() if line.startswith("gateway_policy_refusals_total")
    )
