"""A hand-rolled MCP client for e2e tests: raw aiohttp requests, every header by hand.

Nothing here comes from the gateway: the tests speak the wire protocol
themselves (JSON-RPC bodies, SSE framing, MCP headers), so a bug shared by the
gateway's own encoder and decoder cannot hide.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from multidict import CIMultiDictProxy

JSON = "application/json"
EVENT_STREAM = "text/event-stream"
ACCEPT_BOTH = f"{JSON}, {EVENT_STREAM}"
MODERN = "2026-07-28"
NEWEST_HANDSHAKE = "2025-11-25"
HANDSHAKE_REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# Every wait in these tests is bounded by this (seconds) unless a test says otherwise.
WAIT = 10.0

PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"


def base_headers(**extra: str) -> dict[str, str]:
    """What every Streamable HTTP POST carries: JSON in, JSON or SSE out."""
    headers = {"Content-Type": JSON, "Accept": ACCEPT_BOTH}
    for key, value in extra.items():
        headers[key.replace("_", "-")] = value
    return headers


def request(id_: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def initialize(id_: Any = 1, version: str = NEWEST_HANDSHAKE) -> dict[str, Any]:
    return request(
        id_,
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "e2e-raw-client", "version": "0"},
        },
    )


def modern_meta(version: str = MODERN) -> dict[str, Any]:
    return {PV: version, CAPS: {}, INFO: {"name": "e2e-raw-client", "version": "0"}}


def modern_request(
    id_: Any, method: str, params: dict[str, Any] | None = None, *, version: str = MODERN
) -> dict[str, Any]:
    return request(id_, method, {**(params or {}), "_meta": modern_meta(version)})


def modern_headers(method: str, name: str | None = None, version: str = MODERN) -> dict[str, str]:
    headers = base_headers()
    headers["MCP-Protocol-Version"] = version
    headers["Mcp-Method"] = method
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


# --------------------------------------------------------------------------- SSE


@dataclass
class SseEvent:
    event: str = "message"
    data: str = ""
    id: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


def parse_sse(text: str) -> list[SseEvent]:
    """A whole SSE body into events (comments and empty-data priming events kept out)."""
    events: list[SseEvent] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event = _parse_block(block.split("\n"))
        if event is not None:
            events.append(event)
    return events


def _parse_block(lines: list[str]) -> SseEvent | None:
    event = SseEvent()
    data: list[str] = []
    seen = False
    for line in lines:
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event.event = value
        elif name == "data":
            data.append(value)
            seen = True
        elif name == "id":
            event.id = value
    if not seen or data == [""]:
        return None  # no data, or one empty line (a priming event): nothing dispatched
    event.data = "\n".join(data)
    return event


class SseReader:
    """Reads one open SSE response event by event, every read bounded."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response

    async def next(self, within: float = WAIT) -> SseEvent:
        return await asyncio.wait_for(self._next(), within)

    async def _next(self) -> SseEvent:
        lines: list[str] = []
        while True:
            raw = await self.response.content.readline()
            if not raw:
                raise EOFError("the SSE stream ended")
            line = raw.decode().rstrip("\r\n")
            if line:
                lines.append(line)
                continue
            event = _parse_block(lines)
            lines = []
            if event is not None:
                return event

    async def next_message(self, within: float = WAIT) -> dict[str, Any]:
        """The next `message` event's JSON-RPC message."""
        while True:
            event = await self.next(within)
            if event.event == "message" and event.data:
                message = event.json()
                assert isinstance(message, dict), message
                return message

    async def response_to(self, request_id: Any) -> dict[str, Any]:
        """Read on (past notifications and requests) until the response to ``request_id``."""
        while True:
            message = await self.next_message()
            if message.get("id") == request_id and "method" not in message:
                return message


# --------------------------------------------------------------------------- replies


@dataclass
class Reply:
    """One HTTP answer, read whole: its JSON-RPC messages whether JSON or SSE."""

    status: int
    headers: CIMultiDictProxy[str]
    content_type: str
    text: str
    messages: list[Any] = field(default_factory=list)

    @property
    def message(self) -> dict[str, Any]:
        """The final message (the response, after any notifications on an SSE stream)."""
        assert self.messages, f"no JSON-RPC message in HTTP {self.status}: {self.text[:500]!r}"
        last = self.messages[-1]
        assert isinstance(last, dict), last
        return last

    @property
    def error(self) -> dict[str, Any]:
        error = self.message.get("error")
        assert isinstance(error, dict), f"expected an error, got {self.message}"
        return error

    @property
    def result(self) -> dict[str, Any]:
        result = self.message.get("result")
        assert isinstance(result, dict), f"expected a result, got {self.message}"
        return result

    @property
    def session_id(self) -> str | None:
        return self.headers.get("Mcp-Session-Id")


async def read_reply(response: aiohttp.ClientResponse) -> Reply:
    text = await response.text()
    content_type = response.content_type
    messages: list[Any] = []
    if content_type == JSON and text:
        body = json.loads(text)
        messages = [body]
    elif content_type == EVENT_STREAM:
        messages = [e.json() for e in parse_sse(text) if e.event == "message" and e.data]
    return Reply(response.status, response.headers, content_type, text, messages)


async def post(
    http: aiohttp.ClientSession,
    url: str,
    body: Any,
    headers: dict[str, str] | None = None,
    *,
    raw: bytes | None = None,
    within: float = WAIT,
) -> Reply:
    """POST a JSON-RPC body (or ``raw`` bytes) and read the whole answer (bounded)."""
    data = raw if raw is not None else json.dumps(body).encode()

    async def run() -> Reply:
        async with http.post(
            url, data=data, headers=headers if headers is not None else base_headers()
        ) as response:
            return await read_reply(response)

    return await asyncio.wait_for(run(), within)


async def open_session(
    http: aiohttp.ClientSession,
    url: str,
    version: str = NEWEST_HANDSHAKE,
    headers: dict[str, str] | None = None,
) -> str:
    """initialize + notifications/initialized; the gateway-minted session id.
    ``headers`` (credentials, tenant) go with both: a session is its creator's."""
    reply = await post(http, url, initialize(0, version), {**base_headers(), **(headers or {})})
    assert reply.status == 200, reply.text
    assert reply.result["protocolVersion"] == version, reply.message
    session_id = reply.session_id
    assert session_id, dict(reply.headers)
    done = await post(
        http,
        url,
        notification("notifications/initialized"),
        {**(headers or {}), **session_headers(session_id, version)},
    )
    assert done.status == 202, done.text
    return session_id


def session_headers(session_id: str, version: str = NEWEST_HANDSHAKE) -> dict[str, str]:
    headers = base_headers()
    headers["Mcp-Session-Id"] = session_id
    if version >= "2025-06-18":
        headers["MCP-Protocol-Version"] = version
    return headers


async def call_tool_legacy(
    http: aiohttp.ClientSession,
    url: str,
    session_id: str,
    name: str,
    arguments: dict[str, Any],
    *,
    id_: Any = 1,
    version: str = NEWEST_HANDSHAKE,
    within: float = WAIT,
) -> Reply:
    body = request(id_, "tools/call", {"name": name, "arguments": arguments})
    return await post(http, url, body, session_headers(session_id, version), within=within)


async def call_tool_modern(
    http: aiohttp.ClientSession,
    url: str,
    name: str,
    arguments: dict[str, Any],
    *,
    id_: Any = 1,
    within: float = WAIT,
) -> Reply:
    body = modern_request(id_, "tools/call", {"name": name, "arguments": arguments})
    return await post(http, url, body, modern_headers("tools/call", name), within=within)


def text_of(result: dict[str, Any]) -> str:
    """The text of a CallToolResult's first content block."""
    content = result.get("content")
    assert isinstance(content, list) and content, result
    first = content[0]
    assert isinstance(first, dict) and first.get("type") == "text", result
    return str(first["text"])


def assert_clean_log(log: str) -> None:
    """The gateway logged no unhandled exception and no error."""
    bad = [
        line
        for line in log.splitlines()
        if "Traceback" in line or '"level": "error"' in line or '"level": "critical"' in line
    ]
    assert not bad, "the gateway logged errors:\n" + "\n".join(bad[:20])
