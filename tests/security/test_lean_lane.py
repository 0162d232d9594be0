"""The lean lane (gateway/transport/lane.py) over raw sockets: it answers the usual
POST itself, hands every other request to aiohttp with every byte of it, keeps
pipelined requests in order, and bounds slow and oversized input as aiohttp does.

A real `gateway serve` in front of the demo server; the client is a plain socket, so
each test writes exactly the bytes it means.  aiohttp's answers carry a ``Server``
header and the lane's do not: that is how a test knows which of them answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.transport.lane import LanePost
from tests.e2e.fake_client import modern_headers, modern_request
from tests.security.harness import gateway

READ_TIMEOUT = 10.0
Pair = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def _echo_post(
    n: int, *, version: str = "HTTP/1.1", extra: str = "", text: str | None = None
) -> bytes:
    """A 2026-07-28 client's `tools/call echo` as raw bytes."""
    arguments = {"text": f"hi {n}" if text is None else text}
    body = orjson.dumps(modern_request(n, "tools/call", {"name": "echo", "arguments": arguments}))
    headers = {**modern_headers("tools/call", "echo"), "Host": "127.0.0.1"}
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    head += f"Content-Length: {len(body)}\r\n{extra}\r\n"
    return f"POST /mcp {version}\r\n".encode() + head.encode() + body


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def by_aiohttp(self) -> bool:
        # aiohttp's answers carry a Server header (the gateway's banner); the lane's none.
        return "server" in self.headers

    def json(self) -> Any:
        return orjson.loads(self.body)

    def echoed(self) -> str:
        text: str = self.json()["result"]["content"][0]["text"]
        return text


async def _answer(reader: asyncio.StreamReader) -> Answer:
    """One HTTP/1.1 response (Content-Length or chunked), 1xx ones skipped."""
    async with asyncio.timeout(READ_TIMEOUT):
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ")[1])
            if status >= 200:
                break
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size = int((await reader.readuntil(b"\r\n")).strip(), 16)
                body += await reader.readexactly(size + 2)
                if size == 0:
                    break
                body = body[:-2]
        else:
            body = await reader.read()
    return Answer(status, headers, body)


@contextlib.asynccontextmanager
async def _connection(base: str) -> AsyncIterator[Pair]:
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(base))
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def test_the_usual_post_is_answered_by_the_lane(tmp_path: Path, upstream: str) -> None:
    with gateway(tmp_path, upstream) as gw:
        async with _connection(gw.base) as (reader, writer):
            for n in range(3):  # kept alive between requests
                writer.write(_echo_post(n))
                answer = await _answer(reader)
                assert answer.status == 200 and answer.echoed() == f"hi {n}"
                assert not answer.by_aiohttp and answer.headers["x-request-id"]


async def test_the_lane_off_leaves_every_request_to_aiohttp(tmp_path: Path, upstream: str) -> None:
    with gateway(tmp_path, upstream, settings={"lean_lane": False}) as gw:
        async with _connection(gw.base) as (reader, writer):
            writer.write(_echo_post(1))
            answer = await _answer(reader)
            assert answer.status == 200 and answer.echoed() == "hi 1"
            assert answer.by_aiohttp


async def test_pipelined_requests_are_answered_in_order_across_the_handoff(
    tmp_path: Path, upstream: str
) -> None:
    """Two POSTs and a GET in one write: the lane answers the POSTs one after the
    other, then gives aiohttp the GET (and the connection), byte for byte."""
    with gateway(tmp_path, upstream) as gw:
        async with _connection(gw.base) as (reader, writer):
            writer.write(_echo_post(1) + _echo_post(2) + HEALTHZ + _echo_post(3))
            first, second, health, third = [await _answer(reader) for _ in range(4)]
            assert (first.echoed(), second.echoed()) == ("hi 1", "hi 2")
            assert not first.by_aiohttp and not second.by_aiohttp
            assert health.status == 200 and health.json() == {"status": "ok"}
            assert health.by_aiohttp and third.by_aiohttp  # aiohttp's for good
            assert third.echoed() == "hi 3"
        async with _connection(gw.base) as (reader, writer):
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            metrics = (await _answer(reader)).body.decode()
        handoffs = re.search(r"^gateway_lane_handoffs_total (\S+)$", metrics, re.M)
        # That connection and this one at least (the harness's readiness polls too).
        assert handoffs is not None and float(handoffs[1]) >= 2
        assert re.search(r"^gateway_lane_connections \S+$", metrics, re.M)


async def test_garbage_after_a_pipelined_post_is_aiohttps_after_the_answer(
    tmp_path: Path, upstream: str
) -> None:
    with gateway(tmp_path, upstream) as gw:
        async with _connection(gw.base) as (reader, writer):
            writer.write(_echo_post(1) + b"NOT HTTP AT ALL\r\n\r\n")
            first, second = await _answer(reader), await _answer(reader)
            assert first.echoed() == "hi 1" and not first.by_aiohttp
            assert second.status == 400 and second.by_aiohttp


async def test_a_request_the_lane_does_not_carry_goes_to_aiohttp_whole(
    tmp_path: Path, upstream: str
) -> None:
    """HTTP/1.0, Expect: 100-continue, a chunked body, a query: each answered right."""
    body = orjson.dumps(
        modern_request(7, "tools/call", {"name": "echo", "arguments": {"text": "chunked"}})
    )
    headers = {**modern_headers("tools/call", "echo"), "Host": "127.0.0.1"}
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items()).encode()
    chunked = (
        b"POST /mcp HTTP/1.1\r\n"
        + head
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n%b\r\n" % (10, body[:10])
        + b"%x\r\n%b\r\n0\r\n\r\n" % (len(body) - 10, body[10:])
    )
    with gateway(tmp_path, upstream) as gw:
        for raw, expected in (
            (_echo_post(4, version="HTTP/1.0"), "hi 4"),
            (_echo_post(5, extra="Expect: 100-continue\r\n"), "hi 5"),
            (chunked, "chunked"),
            (_echo_post(6).replace(b"POST /mcp ", b"POST /mcp?x=1 "), "hi 6"),
        ):
            async with _connection(gw.base) as (reader, writer):
                writer.write(raw)
                answer = await _answer(reader)
                assert answer.status == 200 and answer.echoed() == expected
                assert answer.by_aiohttp


async def test_a_body_in_pieces_is_waited_for(tmp_path: Path, upstream: str) -> None:
    raw = _echo_post(8)
    with gateway(tmp_path, upstream) as gw:
        async with _connection(gw.base) as (reader, writer):
            for piece in (raw[:20], raw[20:-30], raw[-30:-1], raw[-1:]):
                writer.write(piece)
                await writer.drain()
            answer = await _answer(reader)
            assert answer.status == 200 and answer.echoed() == "hi 8"
            assert not answer.by_aiohttp


async def test_a_late_body_is_refused_and_the_connection_ends(
    tmp_path: Path, upstream: str
) -> None:
    raw = _echo_post(9)
    with gateway(tmp_path, upstream, settings={"body_timeout": 1.0}) as gw:
        async with _connection(gw.base) as (reader, writer):
            writer.write(raw[:-5])
            answer = await _answer(reader)
            assert answer.status == 400 and "did not arrive" in answer.json()["error"]["message"]
            assert answer.headers.get("connection") == "close"
            async with asyncio.timeout(READ_TIMEOUT):
                assert await reader.read() == b""


@pytest.mark.parametrize(
    "raw",
    [
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40_000 + b"\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nHost: x\r\n" + b"X-Many: y\r\n" * 5_000 + b"\r\n",
        b"NOT HTTP AT ALL\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
    ],
    ids=["huge-field", "many-fields", "garbage", "two-lengths"],
)
async def test_bad_heads_get_aiohttps_4xx(tmp_path: Path, upstream: str, raw: bytes) -> None:
    with gateway(tmp_path, upstream) as gw:
        async with _connection(gw.base) as (reader, writer):
            writer.write(raw)
            answer = await _answer(reader)
            assert 400 <= answer.status < 500, answer.status
        # And the gateway still serves.
        async with _connection(gw.base) as (reader, writer):
            writer.write(_echo_post(10))
            assert (await _answer(reader)).echoed() == "hi 10"


async def test_an_idle_connection_is_closed_after_the_header_timeout(
    tmp_path: Path, upstream: str
) -> None:
    with gateway(tmp_path, upstream, settings={"header_timeout": 1.0}) as gw:
        async with _connection(gw.base) as (reader, writer):
            writer.write(_echo_post(11))
            assert (await _answer(reader)).echoed() == "hi 11"
            async with asyncio.timeout(READ_TIMEOUT):
                assert await reader.read() == b""  # closed by the gateway, idle


def test_a_header_with_a_newline_is_refused() -> None:
    class _Lane:
        closing = False

    class _Connection:
        close_after = False
        lane = _Lane()

    request = LanePost(_Connection(), {}, 0, b"")  # type: ignore[arg-type]
    assert request.head(200, {"A": "b"}, None, b"x").startswith(b"HTTP/1.1 200 OK\r\nA: b\r\n")
    with pytest.raises(ValueError, match="newline"):
        request.head(200, {"A": "b\r\nInjected: yes"}, None, b"")
    with pytest.raises(ValueError, match="newline"):
        request.head(200, {"A": "b\nInjected: yes"}, None, b"")


def _pipeline_without_reading(port: int, raw: bytes, log: Callable[[], str]) -> int:
    """Send ``raw`` (many pipelined requests) on a socket that never reads; once the
    gateway says it cut the client off, how many calls it made (bounded wait)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(READ_TIMEOUT)
        sock.connect(("127.0.0.1", port))
        with contextlib.suppress(OSError):  # the gateway stops reading, then cuts us off
            sock.sendall(raw)
        deadline = time.monotonic() + 30
        # Polled: a client that does not read cannot see the cut (the kernel still
        # tries to deliver what was sent); the gateway's log says it.
        while "client cut off" not in log():
            assert time.monotonic() < deadline, "the client was never cut off"
            time.sleep(0.05)
        return log().count('"event": "call"')


async def test_a_client_that_pipelines_without_reading_is_cut_off(
    tmp_path: Path, upstream: str
) -> None:
    """Answers are not piled up for a client that never reads them: once it is behind
    by more than the socket buffers hold, the lane waits (reading no more of its
    requests), and cuts it off when it has read nothing for the write timeout
    (``stream_idle_timeout``).  Everyone else is still served."""
    calls, size = 200, 60_000  # 12 MB of answers: far more than the socket buffers
    requests = b"".join(_echo_post(n, text="a" * size) for n in range(calls))
    with gateway(tmp_path, upstream, settings={"stream_idle_timeout": 1.0}) as gw:
        made = await asyncio.to_thread(_pipeline_without_reading, _port(gw.base), requests, gw.log)
        assert made < calls, "every answer was made for a client that read none"
        async with _connection(gw.base) as (reader, writer):
            writer.write(_echo_post(1))
            assert (await _answer(reader)).echoed() == "hi 1"
