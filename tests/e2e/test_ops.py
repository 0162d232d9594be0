"""Operating the gateway: /metrics, /readyz, JSON call logs, trace context and the
SIGTERM drain, against a real `gateway serve` process in front of in-process fake
upstreams (tests/e2e/fake_upstreams.py).  Every wait is bounded."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.e2e.fake_client import (
    WAIT,
    call_tool_legacy,
    open_session,
    post,
    session_headers,
    text_of,
)
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import RunningGateway, gateway

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
CALL_FIELDS = {
    "request_id",
    "route",
    "method",
    "client_revision",
    "upstream_revision",
    "outcome",
    "duration_ms",
}


class RecordingUpstream(FakeUpstream):
    """An `ok` fake that remembers the headers of every request it got."""

    def __init__(self, behaviour: str = "ok") -> None:
        super().__init__(behaviour)
        self.headers: list[dict[str, str]] = []

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        return await super()._handle(request)


class HeldUpstream(FakeUpstream):
    """`tools/call` answers (echo) only once the test sets ``released``."""

    def __init__(self) -> None:
        super().__init__("hang")

    async def _call(
        self, request: web.Request, id_: Any, params: dict[str, Any]
    ) -> web.StreamResponse:
        await self.released.wait()
        text = str((params.get("arguments") or {}).get("text", ""))
        result = {"content": [{"type": "text", "text": f"echo: {text}"}]}
        return web.json_response({"jsonrpc": "2.0", "id": id_, "result": result})


@contextlib.asynccontextmanager
async def running(
    *routes: str, tmp_path: Path, extra: tuple[str, ...] = ()
) -> AsyncIterator[RunningGateway]:
    """`gateway serve` as a subprocess, started and stopped off the event loop so the
    in-process fake upstreams keep serving meanwhile."""
    manager = gateway(*routes, tmp_path=tmp_path, extra=extra)
    proc = await asyncio.to_thread(manager.__enter__)
    try:
        yield proc
    finally:
        await asyncio.to_thread(manager.__exit__, None, None, None)


async def get(http: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with http.get(url, timeout=aiohttp.ClientTimeout(total=WAIT)) as response:
        return response.status, await response.text()


def sample(metrics: str, name: str, **labels: str) -> float | None:
    """The value of one sample of the Prometheus text exposition, or None."""
    for line in metrics.splitlines():
        match = re.match(r"^([a-zA-Z_:]+)(?:\{(.*)\})? (\S+)$", line)
        if match is None or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(3))
    return None


async def wait_for_log(proc: RunningGateway, fragment: str, within: float = WAIT) -> None:
    """Until the gateway's log contains ``fragment`` (bounded poll of a file another
    process writes: there is nothing to await)."""
    deadline = time.monotonic() + within
    while fragment not in proc.log():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{fragment!r} not logged within {within}s:\n{proc.log()[-3000:]}")
        await asyncio.sleep(0.02)


async def test_metrics_count_calls_sessions_and_revisions(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with RecordingUpstream() as fake, running(f"/mcp={fake.url}", tmp_path=tmp_path) as gw:
        session = await open_session(http, gw.url(), "2025-03-26")
        reply = await call_tool_legacy(
            http, gw.url(), session, "echo", {"text": "hi"}, version="2025-03-26"
        )
        assert text_of(reply.result) == "echo: hi"
        bad = await call_tool_legacy(
            http, gw.url(), session, "nope", {}, id_=2, version="2025-03-26"
        )
        assert bad.status == 200
        status, text = await get(http, gw.url("/metrics"))
        assert status == 200
        pair = {"route": "/mcp", "client_revision": "2025-03-26", "upstream_revision": "2025-06-18"}
        assert sample(text, "gateway_requests_total", method="tools/call", outcome="ok", **pair)
        calls = sample(text, "gateway_request_duration_seconds_count", **pair)
        assert calls is not None and calls >= 2
        assert sample(text, "gateway_sessions", route="/mcp") == 1
        assert sample(text, "gateway_parked_calls", route="/mcp") == 0
        assert sample(
            text,
            "gateway_upstream_info",
            route="/mcp",
            upstream_revision="2025-06-18",
            transport="http",
        )
        assert sample(text, "gateway_build_info") == 1
        assert sample(text, "gateway_tool_index_restarts_total", route="/mcp") == 0
        assert "# TYPE gateway_request_duration_seconds histogram" in text
        # The client's session has its own upstream session; the calls' connection
        # is back in the pool, idle.
        upstream_sessions = sample(text, "gateway_upstream_sessions", route="/mcp")
        assert upstream_sessions is not None and upstream_sessions >= 1, text
        idle = sample(text, "gateway_upstream_connections", route="/mcp", state="idle")
        assert idle is not None and idle >= 1, text
        assert sample(text, "gateway_upstream_connections", route="/mcp", state="busy") == 0


async def test_errors_are_counted_by_outcome(http: aiohttp.ClientSession, tmp_path: Path) -> None:
    async with (
        FakeUpstream("html500") as fake,
        running(f"/mcp={fake.url}", tmp_path=tmp_path) as gw,
    ):
        session = await open_session(http, gw.url())
        await call_tool_legacy(http, gw.url(), session, "echo", {"text": "x"})
        _, text = await get(http, gw.url("/metrics"))
        errors = [
            line
            for line in text.splitlines()
            if line.startswith("gateway_request_errors_total{") and 'method="tools/call"' in line
        ]
        assert errors and 'outcome="upstream_refused"' in errors[0], text  # its HTTP 500


async def test_readyz_follows_the_upstream(
    http: aiohttp.ClientSession, tmp_path: Path, dead_url: str
) -> None:
    fake = RecordingUpstream()
    await fake.start()
    dead = dead_url
    try:
        async with running(f"/mcp={fake.url}", tmp_path=tmp_path) as gw:
            status, text = await get(http, gw.url("/readyz"))
            body = json.loads(text)
            assert status == 200 and body["ready"] is True, text
            assert body["routes"]["/mcp"]["upstream_revision"] == "2025-06-18"
            assert body["routes"]["/mcp"]["transport"] == "http"
            status, text = await get(http, gw.url("/healthz"))
            assert status == 200
            await fake.stop()  # the upstream goes away: not ready any more (still healthy)
            status, text = await get(http, gw.url("/readyz"))
            assert status == 503 and json.loads(text)["routes"]["/mcp"]["ready"] is False
            assert (await get(http, gw.url("/healthz")))[0] == 200
        async with running(
            f"/mcp={fake.url}", f"/dead={dead},connect_timeout=1", tmp_path=tmp_path
        ) as gw:
            status, text = await get(http, gw.url("/readyz"))
            body = json.loads(text)
            assert status == 503 and body["ready"] is False
            assert body["routes"]["/dead"]["ready"] is False and body["routes"]["/dead"]["error"]
    finally:
        await fake.stop()


async def test_every_log_line_is_json_with_the_call_fields(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with RecordingUpstream() as fake:
        async with running(f"/mcp={fake.url}", tmp_path=tmp_path) as gw:
            session = await open_session(http, gw.url())
            headers = {"traceparent": TRACEPARENT, "X-Request-Id": "req-42"}
            body = {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "traced"}},
            }
            reply = await post(http, gw.url(), body, {**session_headers(session), **headers})
            assert text_of(reply.result) == "echo: traced"
            assert reply.headers["X-Request-Id"] == "req-42"
            await post(http, gw.url(), b"", raw=b"{not json")  # a refused request logs too
        log = gw.log()
    lines = [line for line in log.splitlines() if line.strip()]
    assert lines
    records = []
    for line in lines:
        record = json.loads(line)  # every line, the gateway's and the libraries'
        assert isinstance(record, dict) and "event" in record and "level" in record, line
        records.append(record)
    calls = [r for r in records if r["event"] == "call"]
    assert calls, log
    for record in calls:
        assert set(record) >= CALL_FIELDS, record
        assert record["route"] == "/mcp" and record["upstream_revision"] == "2025-06-18"
    traced = next(r for r in calls if r["method"] == "tools/call")
    assert traced["request_id"] == "req-42" and traced["outcome"] == "ok"
    assert traced["client_revision"] == "2025-11-25"
    assert traced["trace_id"] == TRACEPARENT.split("-")[1]
    assert isinstance(traced["duration_ms"], int | float)
    # The trace context reached the upstream with the call.
    called = [h for h in fake.headers if h.get("traceparent") == TRACEPARENT]
    assert called, fake.headers


async def test_sigterm_drains_the_call_in_flight(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    drain = 15.0
    async with (
        HeldUpstream() as fake,
        running(f"/mcp={fake.url}", tmp_path=tmp_path, extra=("--drain-timeout", str(drain))) as gw,
    ):
        session = await open_session(http, gw.url())
        call = asyncio.create_task(
            call_tool_legacy(http, gw.url(), session, "echo", {"text": "late"}, within=WAIT * 2)
        )
        await asyncio.wait_for(fake.call_started.wait(), WAIT)
        gw.process.send_signal(signal.SIGTERM)
        await wait_for_log(gw, '"event": "draining"')
        # Draining: no new connections, the call still running.
        port = int(gw.base.rsplit(":", 1)[1])
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0
        assert not call.done() and gw.process.poll() is None
        fake.released.set()
        reply = await asyncio.wait_for(call, WAIT)
        assert text_of(reply.result) == "echo: late"
        code = await asyncio.to_thread(gw.process.wait, WAIT)
        assert code == 0, gw.log()[-3000:]
        assert "drain deadline passed" not in gw.log()  # the call ended, not the deadline
        # The upstream session was ended (DELETE) on the way out.
        assert fake.sessions == set()
        assert '"event": "drained"' in gw.log()


async def test_the_drain_deadline_bounds_the_shutdown(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with (
        HeldUpstream() as fake,
        running(f"/mcp={fake.url}", tmp_path=tmp_path, extra=("--drain-timeout", "0.5")) as gw,
    ):
        session = await open_session(http, gw.url())
        call = asyncio.create_task(
            call_tool_legacy(http, gw.url(), session, "echo", {"text": "never"})
        )
        await asyncio.wait_for(fake.call_started.wait(), WAIT)
        gw.process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(gw.process.wait, WAIT)
        assert code == 0, gw.log()[-3000:]
        # It exited with the upstream still holding the call: the deadline cut it off.
        assert "drain deadline passed" in gw.log()
        assert not fake.released.is_set()
        # The client's call ends at once, cut off (its connection closed), not by its own
        # timeout.
        (ended,) = await asyncio.wait_for(asyncio.gather(call, return_exceptions=True), WAIT)
        assert isinstance(ended, aiohttp.ClientError), repr(ended)


async def test_upstream_headers_from_env_and_extra_forwarded_headers(
    http: aiohttp.ClientSession, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("OPS_TEST_UPSTREAM_TOKEN", "Bearer upstream-secret")
    async with RecordingUpstream() as fake:
        config = tmp_path / "gateway.toml"
        config.write_text(
            f"""
[[routes]]
path = "/mcp"
upstream = "{fake.url}"
forward_headers = ["X-Tenant"]
headers_from_env = {{ Authorization = "OPS_TEST_UPSTREAM_TOKEN" }}
"""
        )
        async with running(tmp_path=tmp_path, extra=("--config", str(config))) as gw:
            tenant = {"Authorization": "Bearer client-token", "X-Tenant": "acme"}
            session = await open_session(http, gw.url(), headers=tenant)
            headers = {**session_headers(session), **tenant, "X-Not-Forwarded": "1"}
            body = {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "auth"}},
            }
            reply = await post(http, gw.url(), body, headers)
            assert text_of(reply.result) == "echo: auth"
    assert fake.headers
    # Every upstream request carries the configured secret, never the client's token.
    assert all(h.get("authorization") == "Bearer upstream-secret" for h in fake.headers)
    call = next(h for h in fake.headers if h.get("x-tenant"))
    assert call["x-tenant"] == "acme" and "x-not-forwarded" not in call
    assert "upstream-secret" not in gw.log()


def test_no_versions_in_the_server_header_or_the_front_page_unless_asked(
    tmp_path: Path,
) -> None:
    """Issue 49, item 7: `Server: Python/3.11 aiohttp/3.x` and the version on `/` told
    anyone who asked what runs where; now the banner is opt-in (server_banner)."""
    import urllib.request

    for banner, expected in (("false", "mcp-gateway"), ("true", "mcp-gateway/")):
        env = {"GATEWAY_SERVER_BANNER": banner}
        with gateway(tmp_path=tmp_path, env=env) as running:
            ask = urllib.request.Request(running.url("/"), headers={"Accept": "text/html"})
            with urllib.request.urlopen(ask, timeout=10) as response:
                server, page = response.headers["Server"], response.read().decode()
        assert "version" not in page
        if banner == "false":
            assert server == expected
        else:
            assert server.startswith(expected) and "aiohttp" in server
