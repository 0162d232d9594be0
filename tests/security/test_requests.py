"""Findings 3, 5 and 10: no request shape gets a 500 or silence, and what a client
sends costs the gateway (and its log) a bounded amount."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench.procs import rss_kib
from tests.e2e.fake_client import (
    EVENT_STREAM,
    base_headers,
    modern_headers,
    modern_request,
    open_session,
    parse_sse,
    post,
    request,
    session_headers,
)
from tests.e2e.gateway_proc import REPO
from tests.security.harness import gateway

WAIT = 10.0


DEEP = "__deep__"


def deep(body: Any, depth: int) -> bytes:
    """``body`` as JSON with its ``DEEP`` string replaced by objects nested ``depth``
    levels (written by hand: JSON encoders refuse that much nesting themselves)."""
    return orjson.dumps(body).replace(
        f'"{DEEP}"'.encode(), b'{"a":' * depth + b'"bottom"' + b"}" * depth
    )


async def test_a_10000_item_batch_gets_one_error_and_memory_stays_flat(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str
) -> None:
    with gateway(tmp_path, upstream) as gw:
        url, version = gw.url(), "2025-03-26"
        sid = await open_session(http, url, version)
        headers = session_headers(sid, version)
        item = {"name": "echo", "arguments": {"text": "x"}}
        batch = [request(n, "tools/call", item) for n in range(10_000)]
        before = rss_kib(gw.process.pid)
        started = time.monotonic()
        reply = await post(http, url, batch, headers)
        assert time.monotonic() - started < 5
        assert reply.status == 400
        assert isinstance(reply.message, dict), "one error, not one per item"
        assert reply.error["code"] == -32600 and "at most 64" in reply.error["message"]
        assert rss_kib(gw.process.pid) - before < 32 * 1024
        # A batch within the bound is answered in full.
        small = await post(http, url, batch[:64], headers)
        assert small.status == 200 and len(small.messages[0]) == 64


async def test_deep_nesting_is_invalid_params_on_http(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str
) -> None:
    with gateway(tmp_path, upstream) as gw:
        url = gw.url()
        for depth in (80, 300, 1000):
            arguments = {"text": DEEP}
            body = modern_request(3, "tools/call", {"name": "echo", "arguments": arguments})
            raw = deep(body, depth)
            reply = await post(http, url, None, modern_headers("tools/call", "echo"), raw=raw)
            assert (reply.status, reply.error["code"], reply.message["id"]) == (400, -32602, 3)
            sid = await open_session(http, url)
            legacy = request(4, "tools/call", {"name": "echo", "arguments": arguments})
            raw = deep(legacy, depth)
            reply = await post(http, url, None, session_headers(sid), raw=raw)
            assert (reply.status, reply.error["code"], reply.message["id"]) == (200, -32602, 4)


async def test_deep_nesting_is_answered_on_an_http_sse_stream(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str
) -> None:
    """Over HTTP+SSE such a call used to be never answered."""
    with gateway(tmp_path, upstream) as gw:
        async with http.get(gw.url(), headers={"Accept": EVENT_STREAM}) as stream:
            first = await stream.content.readuntil(b"\n\n")
            target = gw.base + parse_sse(first.decode())[0].data
            body = request(5, "tools/call", {"name": "echo", "arguments": {"t": DEEP}})
            headers = {"Content-Type": "application/json"}
            reply = await post(http, target, None, headers, raw=deep(body, 500))
            assert reply.status == 202
            async with asyncio.timeout(WAIT):
                event = await stream.content.readuntil(b"\n\n")
            message = parse_sse(event.decode())[0].json()
            assert message["id"] == 5 and message["error"]["code"] == -32602


async def test_deep_nesting_is_invalid_params_on_stdio(tmp_path: Path, upstream: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "stdio",
        "--upstream",
        upstream,
        cwd=REPO,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for n, depth in enumerate((100, 900)):
            params = {"name": "echo", "arguments": {"t": DEEP}}
            proc.stdin.write(deep(modern_request(n, "tools/call", params), depth) + b"\n")
            await proc.stdin.drain()
            async with asyncio.timeout(WAIT * 2):
                answer = orjson.loads(await proc.stdout.readline())
            assert answer["id"] == n and answer["error"]["code"] == -32602, answer
    finally:
        proc.stdin.close()
        async with asyncio.timeout(WAIT * 2):
            await proc.wait()


async def test_non_object_params_on_the_stateless_revision(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str
) -> None:
    """An AttributeError in the header checks used to make these a 500."""
    with gateway(tmp_path, upstream) as gw:
        for params in ([1, 2], "text", 7, True):
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
            reply = await post(http, gw.url(), body, modern_headers("tools/call", "echo"))
            assert 400 <= reply.status < 500 and reply.error["code"] in (-32600, -32020), reply.text


async def test_malformed_http_and_huge_fields_log_bounded_lines(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str
) -> None:
    """A broken request is one warning line (no traceback), and a 3 MB method name
    does not make a 3 MB log line (teardown also insists on no traceback)."""
    with gateway(tmp_path, upstream) as gw:
        port = int(gw.base.rsplit(":", 1)[1])
        for raw in (b"POST /mcp HTTP/1.1\r\nHost: x\r\nBroken header\r\n\r\n",):
            with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
                sock.sendall(raw)
                assert b" 400 " in sock.recv(100)
        huge = {"jsonrpc": "2.0", "id": 1, "method": "m" * 3_000_000, "params": {}}
        sid = await open_session(http, gw.url())
        reply = await post(http, gw.url(), huge, session_headers(sid))
        assert reply.status < 500 and reply.error  # the upstream's refusal, passed on
        reply = await post(http, gw.url(), huge, base_headers())
        assert reply.status < 500
    lines = gw.log().splitlines()
    assert max(len(line) for line in lines) < 8 * 1024
    assert any("BadHttpMessage" in line or "Bad" in line for line in lines if "warning" in line)


async def test_ops_endpoints_check_the_host(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str
) -> None:
    """DNS rebinding: /metrics, /readyz and /healthz answer loopback Hosts and the
    configured scrape hosts only (the gateway listens on loopback)."""
    with gateway(tmp_path, upstream, settings={"scrape_hosts": ["prom.internal"]}) as gw:
        for path in ("/metrics", "/readyz", "/healthz"):
            async with http.get(gw.base + path, headers={"Host": "evil.example"}) as resp:
                assert resp.status == 403, path
            async with http.get(gw.base + path, headers={"Host": "prom.internal:9"}) as resp:
                assert resp.status == 200, path
            async with http.get(gw.base + path) as resp:
                assert resp.status == 200, path
