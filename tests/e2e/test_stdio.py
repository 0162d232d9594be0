"""stdio, end to end: the StdioCarrier against the official SDKs' stdio servers, and
the inbound stdio transport (serve_stdio) spoken by hand in front of a real upstream."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from peers.registry import peer, require_installed, running_server

from gateway.bridge.backend import Backend
from gateway.protocol import AdapterSet
from gateway.transport.guard import OriginGuard
from gateway.transport.route import Route
from gateway.transport.stdio import serve_stdio
from gateway.upstream.carriers.base import Message
from gateway.upstream.carriers.stdio import StdioCarrier
from gateway.upstream.link import UpstreamLink, UpstreamSettings
from tests.e2e.fake_client import (
    MODERN,
    NEWEST_HANDSHAKE,
    WAIT,
    initialize,
    modern_meta,
    modern_request,
    notification,
    request,
    text_of,
)

LEGACY_SERVER = "python-1.30.0-server"
DUAL_SERVER = "python-2.3.0-server"
HTTP_UPSTREAM = "node-sdk1-server"


async def roundtrip(carrier: StdioCarrier, message: Message) -> list[Message]:
    exchange = await carrier.request(message, {})
    async with asyncio.timeout(WAIT):
        return [m async for m in exchange.messages]


# ------------------------------------------------------------------ the carrier


async def test_carrier_legacy_sdk_server() -> None:
    server = peer(LEGACY_SERVER)
    require_installed(server)
    carrier = StdioCarrier(server.server_argv("stdio"), route="/legacy")
    try:
        await carrier.start()
        opened = await roundtrip(carrier, initialize(1, NEWEST_HANDSHAKE))
        assert opened[-1]["result"]["protocolVersion"] == NEWEST_HANDSHAKE
        await carrier.send(notification("notifications/initialized"), {})
        answer = await roundtrip(
            carrier, request(2, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        )
        assert text_of(answer[-1]["result"]) == "echo: hi"
        progress = await roundtrip(
            carrier,
            request(
                3,
                "tools/call",
                {"name": "progress", "arguments": {"steps": 2}, "_meta": {"progressToken": "p"}},
            ),
        )
        assert [m["params"]["progress"] for m in progress if "progress" in m.get("params", {})] == [
            1,
            2,
        ]
        assert text_of(progress[-1]["result"]) == "done 2"
    finally:
        await carrier.close()
    assert not carrier.is_open


async def test_carrier_modern_sdk_server() -> None:
    server = peer(DUAL_SERVER)
    require_installed(server)
    carrier = StdioCarrier(server.server_argv("stdio"), route="/modern")
    try:
        await carrier.start()
        discovered = await roundtrip(carrier, modern_request(1, "server/discover"))
        assert MODERN in discovered[-1]["result"]["supportedVersions"]
        answer = await roundtrip(
            carrier,
            modern_request(2, "tools/call", {"name": "echo", "arguments": {"text": "yo"}}),
        )
        assert text_of(answer[-1]["result"]) == "echo: yo"
        # Concurrent calls on the one shared stdout come back to their callers.
        answers = await asyncio.gather(
            *(
                roundtrip(
                    carrier,
                    modern_request(
                        10 + i, "tools/call", {"name": "echo", "arguments": {"text": str(i)}}
                    ),
                )
                for i in range(8)
            )
        )
        assert [text_of(a[-1]["result"]) for a in answers] == [f"echo: {i}" for i in range(8)]
    finally:
        await carrier.close()


# ------------------------------------------------------------------ serve_stdio


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    server = peer(HTTP_UPSTREAM)
    require_installed(server)
    with running_server(server, "streamable-http") as url:
        assert isinstance(url, str)
        yield url


class Client:
    """The test's end of the stdio pipe: writes lines, reads lines."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def send(self, message: Any) -> None:
        self.writer.write(orjson.dumps(message) + b"\n")
        await self.writer.drain()

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def receive(self) -> Any:
        async with asyncio.timeout(WAIT):
            line = await self.reader.readline()
        assert line.endswith(b"\n"), line
        return orjson.loads(line)

    async def until(self, id_: Any) -> tuple[list[Any], Any]:
        """Every line up to the response with ``id_``: (the others, the response)."""
        others = []
        while True:
            message = await self.receive()
            if isinstance(message, dict) and message.get("id") == id_ and "method" not in message:
                return others, message
            others.append(message)

    async def ask(self, message: dict[str, Any]) -> Any:
        await self.send(message)
        _, response = await self.until(message["id"])
        return response


@pytest.fixture
async def client(upstream: str) -> AsyncIterator[Client]:
    adapters = AdapterSet.default()
    async with aiohttp.ClientSession() as http:
        link = UpstreamLink(UpstreamSettings(upstream, request_timeout=WAIT), adapters, http)
        route = Route(
            path="/stdio",
            backend=Backend(link, adapters),
            adapters=adapters,
            guard=OriginGuard(loopback_only=True),
            ask_timeout=WAIT,
        )
        ours, theirs = socket.socketpair()
        server_reader, server_writer = await asyncio.open_connection(sock=ours)
        client_reader, client_writer = await asyncio.open_connection(
            sock=theirs, limit=8 * 1024 * 1024
        )
        serving = asyncio.create_task(
            serve_stdio(route, server_reader, server_writer, eof_grace=1.0)
        )
        try:
            yield Client(client_reader, client_writer)
        finally:
            client_writer.write_eof()  # the client's end of input: the server winds down
            async with asyncio.timeout(WAIT):
                await serving
            server_writer.close()
            client_writer.close()
            await link.close()


async def test_serve_legacy_client(client: Client) -> None:
    opened = await client.ask(initialize(1, "2025-06-18"))
    assert opened["result"]["protocolVersion"] == "2025-06-18"
    assert "tools" in opened["result"]["capabilities"]
    await client.send(notification("notifications/initialized"))
    listed = await client.ask(request(2, "tools/list"))
    assert "echo" in {tool["name"] for tool in listed["result"]["tools"]}
    called = await client.ask(
        request(3, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    )
    assert text_of(called["result"]) == "echo: hi"
    assert (await client.ask(request(4, "ping")))["result"] == {}
    unknown = await client.ask(request(5, "nonexistent/method"))
    assert unknown["error"]["code"] == -32601


async def test_serve_progress_reaches_the_client(client: Client) -> None:
    await client.ask(initialize(1))
    await client.send(notification("notifications/initialized"))
    others, response = await _send_and_collect(
        client,
        request(
            2,
            "tools/call",
            {"name": "progress", "arguments": {"steps": 2}, "_meta": {"progressToken": "tok"}},
        ),
    )
    progress = [m for m in others if m.get("method") == "notifications/progress"]
    assert [m["params"]["progress"] for m in progress] == [1, 2]
    assert all(m["params"]["progressToken"] == "tok" for m in progress)
    assert text_of(response["result"]) == "done 2"


async def _send_and_collect(client: Client, message: dict[str, Any]) -> tuple[list[Any], Any]:
    await client.send(message)
    return await client.until(message["id"])


async def test_serve_modern_client(client: Client) -> None:
    discovered = await client.ask(modern_request(1, "server/discover"))
    assert MODERN in discovered["result"]["supportedVersions"]
    called = await client.ask(
        modern_request(2, "tools/call", {"name": "echo", "arguments": {"text": "modern"}})
    )
    assert text_of(called["result"]) == "echo: modern"
    wrong = await client.ask(
        request(
            3,
            "tools/list",
            {"_meta": {**modern_meta(), "io.modelcontextprotocol/protocolVersion": "2099-01-01"}},
        )
    )
    assert wrong["error"]["code"] == -32022
    assert MODERN in wrong["error"]["data"]["supported"]


async def test_serve_bad_lines_are_answered_and_survived(client: Client) -> None:
    await client.send_raw(b"this is not json\n")
    parse_error = await client.receive()
    assert parse_error["error"]["code"] == -32700 and parse_error["id"] is None
    await client.send_raw(b"\n   \n")  # blank lines are ignored
    await client.send({"jsonrpc": "2.0", "method": "notifications/whatever"})  # no answer
    assert (await client.ask(request("after", "ping")))["result"] == {}


async def test_serve_pushed_ask_is_answered(client: Client) -> None:
    opening = initialize(1)
    opening["params"]["capabilities"] = {"elicitation": {}}
    await client.ask(opening)
    await client.send(notification("notifications/initialized"))
    await client.send(request(2, "tools/call", {"name": "ask_name", "arguments": {}}))
    asked = await client.receive()
    assert asked["method"] == "elicitation/create"
    await client.send(
        {
            "jsonrpc": "2.0",
            "id": asked["id"],
            "result": {"action": "accept", "content": {"name": "Ada"}},
        }
    )
    _, response = await client.until(2)
    assert text_of(response["result"]) == "hello Ada"


async def test_serve_cancelled_call_gets_no_answer(client: Client) -> None:
    opening = initialize(1)
    opening["params"]["capabilities"] = {"elicitation": {}}
    await client.ask(opening)
    await client.send(notification("notifications/initialized"))
    await client.send(request(7, "tools/call", {"name": "ask_name", "arguments": {}}))
    asked = await client.receive()
    assert asked["method"] == "elicitation/create"  # the call is now waiting on us
    await client.send(
        notification("notifications/cancelled", {"requestId": 7, "reason": "changed my mind"})
    )
    # Nothing more for request 7: the next line is the ping's answer.
    await client.send(request(8, "ping"))
    assert await client.receive() == {"jsonrpc": "2.0", "id": 8, "result": {}}
    # The gateway still works afterwards.
    called = await client.ask(
        request(9, "tools/call", {"name": "echo", "arguments": {"text": "again"}})
    )
    assert text_of(called["result"]) == "echo: again"


# ------------------------------------------------------------------ run_stdio (a real process)

RUN_STDIO = textwrap.dedent(
    """
    import asyncio, sys
    import aiohttp
    from gateway.protocol import AdapterSet
    from gateway.transport.guard import OriginGuard
    from gateway.bridge.backend import Backend
    from gateway.transport.route import Route
    from gateway.transport.stdio import run_stdio
    from gateway.observability import CallObservers
    from gateway.upstream.link import UpstreamLink, UpstreamSettings

    async def main(url):
        adapters = AdapterSet.default()
        async with aiohttp.ClientSession() as http:
            link = UpstreamLink(UpstreamSettings(url), adapters, http)
            route = Route(path="/stdio", backend=Backend(link, adapters), adapters=adapters,
                          guard=OriginGuard(loopback_only=True))
            # A stray print while serving must not corrupt the protocol stream.
            route.observer = CallObservers(lambda record: print("observed", record["method"]))
            await run_stdio(route, eof_grace=5.0)
            await link.close()

    asyncio.run(main(sys.argv[1]))
    """
)


@pytest.mark.parametrize("stdin_kind", ["pipe", "file"])
def test_run_stdio_process(upstream: str, tmp_path: Path, stdin_kind: str) -> None:
    script = tmp_path / "run_stdio.py"
    script.write_text(RUN_STDIO)
    lines = [
        initialize(1),
        notification("notifications/initialized"),
        request(2, "tools/call", {"name": "echo", "arguments": {"text": "piped"}}),
        request(3, "ping"),
    ]
    data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    root = Path(__file__).resolve().parents[2]
    argv = [sys.executable, str(script), upstream]
    if stdin_kind == "pipe":
        done = subprocess.run(argv, input=data, capture_output=True, timeout=60, cwd=root)
    else:
        source = tmp_path / "in.jsonl"
        source.write_bytes(data)
        with source.open("rb") as stdin:
            done = subprocess.run(argv, stdin=stdin, capture_output=True, timeout=60, cwd=root)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    answers = {m["id"]: m for m in map(orjson.loads, done.stdout.splitlines())}
    assert set(answers) == {1, 2, 3}, done.stdout
    assert text_of(answers[2]["result"]) == "echo: piped"
    assert b"observed tools/call" in done.stderr
