"""Errors without internals (issue 39): a client of any revision whose upstream cannot
be reached hears a short reason naming the route and a request id, never the
upstream's address, command or the socket/TLS library's words; the gateway's log line
of the call has the method, the reason in full and the same request id."""

from __future__ import annotations

import json
import re
from pathlib import Path

import aiohttp
import pytest

from tests.e2e.fake_client import (
    initialize,
    modern_headers,
    modern_request,
    post,
)
from tests.e2e.gateway_proc import gateway

COMMAND = "no-such-mcp-server-xyz"
# What an error must never show a client.
INTERNALS = re.compile(r"127\.0\.0\.1|ConnectionRefused|Errno|Connect call|SSL|" + COMMAND)
LEGACY = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def _error_of(text: str) -> dict[str, object]:
    body = json.loads(text)
    assert "error" in body, body
    error: dict[str, object] = body["error"]
    return error


@pytest.mark.parametrize("path", ["/down", "/down-h", "/down-m", "/down-s", "/nocmd"])
async def test_no_upstream_address_or_command_in_any_error(
    tmp_path: Path, http: aiohttp.ClientSession, dead_url: str, path: str
) -> None:
    """Unpinned (the era probe's error), and pinned to each carrier: a handshake-era
    and a stateless server's Streamable HTTP, HTTP+SSE, stdio."""
    routes = (
        f"/down={dead_url}",
        f"/down-h={dead_url},version=2025-11-25,transport=http",
        f"/down-m={dead_url},version=2026-07-28,transport=http",
        f"/down-s={dead_url},transport=sse",
        f"/nocmd=stdio:{COMMAND} --flag",
    )
    with gateway(*routes, tmp_path=tmp_path) as gw:
        replies = [await post(http, gw.url(path), initialize(1, version)) for version in LEGACY]
        modern = modern_request(2, "tools/call", {"name": "add", "arguments": {}})
        replies.append(await post(http, gw.url(path), modern, modern_headers("tools/call", "add")))
        for number, reply in enumerate(replies):
            assert not INTERNALS.search(reply.text), reply.text
            message = str(_error_of(reply.text)["message"])
            assert f"route {path}" in message, message
            request_id = reply.headers["X-Request-Id"]
            assert f"request id {request_id}" in message, message
            # A status only for the stateless revision's client: the handshake era's
            # SDKs (Python 1.x) fail their whole session on a 5xx answer to a POST.
            modern_reply = number == len(replies) - 1
            assert reply.status in ((502, 503, 504) if modern_reply else (200,)), reply.status
            if reply.status == 503:
                assert reply.headers.get("Retry-After"), dict(reply.headers)
        log = gw.log()
    # The log keeps the whole story, under the id the client was given.
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    calls = [line for line in lines if line.get("event") == "call"]
    called = [c for c in calls if c.get("request_id") == request_id]
    assert called, calls
    assert called[0]["method"] == "tools/call" and called[0]["tool"] == "add"
    assert "unreachable" in called[0]["reason"] or COMMAND in called[0]["reason"]
