"""Faults of a server on the old HTTP+SSE transport, end to end: what the client is
told, and that the route recovers.  The Streamable HTTP and stdio carriers have their
own fault tests (test_http_faults.py, test_stdio_faults.py); this one's upstream is
tests/e2e/fake_sse_upstream.py, a 2024-11-05 server whose stream can end mid-call,
hang or send garbage.  A 2026-07-28 client and a 2025-11-25 session client each time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from tests.e2e.fake_client import call_tool_legacy, call_tool_modern, open_session, text_of
from tests.e2e.fake_sse_upstream import FakeSseUpstream
from tests.e2e.test_http_faults import PROMPT, assert_upstream_error, running_gateway
from tests.e2e.test_told_what_happened import MAY_HAVE_RUN

TIMEOUT = 0.5  # the route's


def _route(fake: FakeSseUpstream) -> str:
    return f"/sse={fake.url},transport=sse,timeout={TIMEOUT}"


async def _both_clients(http: aiohttp.ClientSession, url: str, text: str) -> list[Any]:
    """A 2026-07-28 client's call, then a 2025-11-25 session client's."""
    modern = await call_tool_modern(http, url, "echo", {"text": text}, id_="m", within=PROMPT)
    session = await open_session(http, url)
    legacy = await call_tool_legacy(
        http, url, session, "echo", {"text": text}, id_=2, within=PROMPT
    )
    return [modern, legacy]


async def test_a_stream_ended_after_the_call_arrived_may_have_run_and_the_route_recovers(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with (
        FakeSseUpstream("drop") as fake,
        running_gateway(_route(fake), tmp_path=tmp_path) as gw,
    ):
        modern, legacy = await _both_clients(http, gw.url("/sse"), "x")
        for reply, id_ in ((modern, "m"), (legacy, 2)):
            message = assert_upstream_error(reply, id_, MAY_HAVE_RUN)
            assert "unreachable" not in message and "127.0.0.1" not in message, message
            assert "Retry-After" not in reply.headers, dict(reply.headers)
        assert fake.calls == ["x", "x"]  # each ran once: never sent again behind its back
        fake.behaviour = "ok"
        modern, legacy = await _both_clients(http, gw.url("/sse"), "again")
        assert text_of(modern.result) == "echo: again", modern.message
        assert text_of(legacy.result) == "echo: again", legacy.message


async def test_a_hanging_call_times_out_is_cancelled_and_the_route_goes_on(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with (
        FakeSseUpstream("hang") as fake,
        running_gateway(_route(fake), tmp_path=tmp_path) as gw,
    ):
        modern, legacy = await _both_clients(http, gw.url("/sse"), "x")
        assert_upstream_error(modern, "m", "did not answer in time", "timed out")
        assert modern.status == 504, modern.status
        assert_upstream_error(legacy, 2, "did not answer in time", "timed out")
        cancelled = await fake.wait_cancelled(2, PROMPT)  # each told to stop, as asked
        assert len(set(cancelled)) == 2, cancelled
        fake.behaviour = "ok"
        modern, legacy = await _both_clients(http, gw.url("/sse"), "fine")
        assert text_of(modern.result) == "echo: fine" and text_of(legacy.result) == "echo: fine"


async def test_an_event_that_is_not_json_is_dropped_and_the_call_times_out(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """An event nobody can read names no call (the stream is the session's): dropped,
    and the call it may have answered ends at its time-out, which says it may have run."""
    async with (
        FakeSseUpstream("garbage") as fake,
        running_gateway(_route(fake), tmp_path=tmp_path) as gw,
    ):
        modern, legacy = await _both_clients(http, gw.url("/sse"), "x")
        for reply, id_ in ((modern, "m"), (legacy, 2)):
            message = assert_upstream_error(reply, id_, "timed out")
            assert MAY_HAVE_RUN in message and "{not json" not in reply.text, reply.text
        fake.behaviour = "ok"
        modern, _ = await _both_clients(http, gw.url("/sse"), "fine")
        assert text_of(modern.result) == "echo: fine", modern.message
