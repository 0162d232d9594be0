"""Finding 4: descriptors and time.  Slow clients are cut off, abandoned parked calls
cannot starve the process of descriptors, a short budget refuses work with 503
before it runs out, and SIGTERM ends the process under load."""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from pathlib import Path

import aiohttp

from bench.procs import open_fds
from tests.e2e.fake_client import (
    modern_headers,
    modern_request,
    open_session,
    post,
    request,
    session_headers,
    text_of,
)
from tests.security.harness import gateway

CAPS = "io.modelcontextprotocol/clientCapabilities"
ALICE = {"Authorization": "Bearer alice-token"}


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def _closed_within(sock: socket.socket, seconds: float, drip: bytes) -> float | None:
    """Send ``drip`` a byte at a time (a slow client) until the server closes the
    connection; how long that took (None: it never did within ``seconds``)."""
    started = time.monotonic()
    sock.settimeout(0.2)
    for byte in drip * 1000:
        if time.monotonic() - started > seconds:
            return None
        try:
            sock.sendall(bytes([byte]))
            if sock.recv(1024) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue  # nothing to read yet: the server is still waiting for us
        except OSError:
            return time.monotonic() - started
    return None


async def test_a_slow_header_client_is_cut_off(tmp_path: Path, upstream: str) -> None:
    with gateway(tmp_path, upstream, settings={"header_timeout": 1.0}) as gw:
        with socket.create_connection(("127.0.0.1", _port(gw.base)), timeout=5) as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\n")
            took = await asyncio.to_thread(_closed_within, sock, 10.0, b"X-Slow: a\r\n")
        assert took is not None and took < 5, took


async def test_a_slow_body_is_refused(tmp_path: Path, upstream: str) -> None:
    with gateway(tmp_path, upstream, settings={"body_timeout": 1.0}) as gw:
        head = (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{"
        )
        with socket.create_connection(("127.0.0.1", _port(gw.base)), timeout=10) as sock:
            sock.sendall(head)
            started = time.monotonic()
            answer = await asyncio.to_thread(sock.recv, 200)
        assert b" 400 " in answer and time.monotonic() - started < 5


async def _greet(http: aiohttp.ClientSession, url: str, who: dict[str, str], id_: int) -> int:
    body = modern_request(id_, "tools/call", {"name": "greet_me", "arguments": {}})
    body["params"]["_meta"][CAPS] = {"elicitation": {}}
    reply = await post(http, url, body, {**modern_headers("tools/call", "greet_me"), **who})
    return reply.status


async def test_600_abandoned_parked_calls_under_1024_descriptors(
    tmp_path: Path, upstream: str
) -> None:
    """600 callers (distinct credentials, so no per-principal quota helps) each park a
    call and abandon it, with the gateway limited to 1,024 descriptors: everyone else
    is still served, and the gateway stays clear of its limit."""
    with gateway(tmp_path, upstream, nofile=1024) as gw:
        url = gw.url()
        connector = aiohttp.TCPConnector(limit=50)
        async with aiohttp.ClientSession(connector=connector) as flood:
            gate = asyncio.Semaphore(50)

            async def one(n: int) -> int:
                async with gate:
                    return await _greet(flood, url, {"Authorization": f"Bearer t{n}"}, n)

            statuses = await asyncio.gather(*(one(n) for n in range(600)))
        assert set(statuses) <= {200, 503}, set(statuses)
        assert open_fds(gw.process.pid) < 1024 - 64
        async with aiohttp.ClientSession() as http:
            sid = await open_session(http, url, headers=ALICE)
            body = request(1, "tools/call", {"name": "echo", "arguments": {"text": "served"}})
            reply = await post(http, url, body, {**session_headers(sid), **ALICE})
            assert text_of(reply.result) == "served"
            assert await _greet(http, url, ALICE, 2) == 200


async def test_short_of_descriptors_new_work_gets_503_and_ops_still_answer(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str
) -> None:
    with gateway(tmp_path, upstream, nofile=1024, settings={"fd_reserve": 1020}) as gw:
        reply = await post(http, gw.url(), request(1, "ping"), modern_headers("ping"))
        assert reply.status == 503 and reply.error["code"] == -32000
        async with http.get(gw.base + "/metrics") as resp:
            assert resp.status == 200


async def test_sigterm_under_load_ends_the_process(tmp_path: Path, upstream: str) -> None:
    drain = 2.0
    with gateway(tmp_path, upstream, settings={"drain_timeout": drain}, check=False) as gw:
        url = gw.url()
        async with aiohttp.ClientSession() as http:
            sid = await open_session(http, url)

            async def echo_forever(n: int) -> None:
                body = request(n, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
                while True:
                    await post(http, url, body, session_headers(sid))

            async def greet_forever(n: int) -> None:
                while True:
                    await _greet(http, url, {}, n)

            load = [asyncio.ensure_future(echo_forever(n)) for n in range(30)]
            load += [asyncio.ensure_future(greet_forever(n)) for n in range(30)]
            try:
                await asyncio.sleep(1.0)  # the load runs a while (not a synchronisation)
                assert gw.process.poll() is None
                gw.process.send_signal(signal.SIGTERM)
                started = time.monotonic()
                code = await asyncio.to_thread(gw.process.wait, drain + 10)
                took = time.monotonic() - started
            finally:
                for task in load:
                    task.cancel()
                await asyncio.gather(*load, return_exceptions=True)
        assert code == 0 and took < drain + 8, (code, took)
