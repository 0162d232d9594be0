"""Raw MCP clients on aiohttp: every header and body by hand, nothing from the gateway.

Two clients, the two eras the gateway joins:

- `ModernClient` is a 2026-07-28 client: stateless, no handshake; every request
  carries its revision, capabilities and identity in ``params._meta`` and the
  ``MCP-Protocol-Version`` / ``Mcp-Method`` / ``Mcp-Name`` headers.
- `LegacyClient` is a 2025-11-25 client: ``initialize`` once, then every request
  carries the ``Mcp-Session-Id`` the server minted.

Each answer is checked (the echoed text comes back; ``greet_me`` is answered
``input_required``, its retry greets) so a fast error is never counted as a fast call.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

JSON = "application/json"
EVENT_STREAM = "text/event-stream"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"

PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
CLIENT_INFO = {"name": "gateway-bench", "version": "0"}


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    """What a 2026-07-28 client's POST carries besides its body."""
    headers = {
        "Content-Type": JSON,
        "Accept": f"{JSON}, {EVENT_STREAM}",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def modern_call(
    i: int, name: str, arguments: dict[str, Any], capabilities: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A 2026-07-28 ``tools/call`` with its per-request ``_meta``."""
    meta = {PV: MODERN, CAPS: {"elicitation": {}} if capabilities is None else capabilities}
    meta[INFO] = CLIENT_INFO
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}


def initialize(version: str, id_: Any = 0) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO}
    return {"jsonrpc": "2.0", "id": id_, "method": "initialize", "params": params}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class BadReply(Exception):
    """The server answered, but not what the call should get."""


def decode(body: bytes, content_type: str, request_id: Any) -> dict[str, Any]:
    """The JSON-RPC response to ``request_id`` in a JSON or SSE body."""
    if content_type == JSON:
        message = orjson.loads(body)
        if isinstance(message, dict):
            return message
        raise BadReply(f"not a JSON-RPC response: {body[:200]!r}")
    if content_type == EVENT_STREAM:
        for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
            data = [
                line[5:].removeprefix(b" ") for line in block.split(b"\n") if line[:5] == b"data:"
            ]
            payload = b"\n".join(data)
            if not payload.strip():  # no data, or a priming event's empty one
                continue
            message = orjson.loads(payload)
            if isinstance(message, dict) and message.get("id") == request_id:
                return message
        raise BadReply(f"no response to {request_id!r} on the stream: {body[:200]!r}")
    raise BadReply(f"unexpected content type {content_type!r}: {body[:200]!r}")


def result_of(message: dict[str, Any]) -> dict[str, Any]:
    result = message.get("result")
    if not isinstance(result, dict):
        raise BadReply(f"expected a result, got {str(message)[:300]}")
    return result


def check_echo(message: dict[str, Any], text: str) -> None:
    content = result_of(message).get("content")
    if not (isinstance(content, list) and content and content[0].get("text") == text):
        raise BadReply(f"echo did not come back: {str(message)[:300]}")


class Client:
    """One MCP client over one aiohttp session (keep-alive connections, reused)."""

    version = ""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http = http
        self.url = url

    async def post(self, message: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        async with self.http.post(self.url, data=orjson.dumps(message), headers=headers) as resp:
            body = await resp.read()
            if resp.status != 200:
                raise BadReply(f"HTTP {resp.status}: {body[:300]!r}")
            return decode(body, resp.content_type, message.get("id"))

    async def echo(self, i: int) -> None:
        raise NotImplementedError


class ModernClient(Client):
    """A 2026-07-28 client: stateless, per-request ``_meta`` and headers."""

    version = MODERN

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        super().__init__(http, url)
        self.meta = {PV: MODERN, CAPS: {"elicitation": {}}, INFO: CLIENT_INFO}

    def headers(self, method: str, name: str | None = None) -> dict[str, str]:
        return modern_headers(method, name)

    async def call_tool(
        self, i: int, name: str, arguments: dict[str, Any], **extra: Any
    ) -> dict[str, Any]:
        params = {"name": name, "arguments": arguments, "_meta": self.meta, **extra}
        message = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
        return await self.post(message, self.headers("tools/call", name))

    async def echo(self, i: int) -> None:
        text = f"bench-{i}"
        check_echo(await self.call_tool(i, "echo", {"text": text}), text)

    async def greet_and_abandon(self, i: int) -> None:
        """Call ``greet_me``; it comes back ``input_required``, and is never retried."""
        result = result_of(await self.call_tool(i, "greet_me", {}))
        if result.get("resultType") != "input_required" or "requestState" not in result:
            raise BadReply(f"expected input_required, got {str(result)[:300]}")

    async def greet_round(self, i: int) -> None:
        """``greet_me`` answered ``input_required``, then the retry with the name: done."""
        asked = result_of(await self.call_tool(i, "greet_me", {}))
        if asked.get("resultType") != "input_required" or "requestState" not in asked:
            raise BadReply(f"expected input_required, got {str(asked)[:300]}")
        answers = {
            key: {"action": "accept", "content": {"name": "Bench"}}
            for key in asked.get("inputRequests") or {}
        }
        done = await self.call_tool(
            i + 1, "greet_me", {}, inputResponses=answers, requestState=asked["requestState"]
        )
        check_echo(done, "Hello, Bench!")


class LegacyClient(Client):
    """A 2025-11-25 client: ``initialize`` once, then the session header on every request."""

    version = LEGACY

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        super().__init__(http, url)
        self.session_headers: dict[str, str] = {}

    async def initialize(self) -> None:
        base = {"Content-Type": JSON, "Accept": f"{JSON}, {EVENT_STREAM}"}
        params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO}
        message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        async with self.http.post(self.url, data=orjson.dumps(message), headers=base) as resp:
            body = await resp.read()
            session_id = resp.headers.get("Mcp-Session-Id")
            if resp.status != 200 or not session_id:
                raise BadReply(f"initialize failed: HTTP {resp.status}: {body[:300]!r}")
            result = result_of(decode(body, resp.content_type, 0))
            if result.get("protocolVersion") != LEGACY:
                raise BadReply(f"initialize negotiated {result.get('protocolVersion')!r}")
        self.session_headers = {
            **base,
            "Mcp-Session-Id": session_id,
            "MCP-Protocol-Version": LEGACY,
        }
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with self.http.post(
            self.url, data=orjson.dumps(done), headers=self.session_headers
        ) as resp:
            await resp.read()
            if resp.status != 202:
                raise BadReply(f"notifications/initialized: HTTP {resp.status}")

    async def echo(self, i: int) -> None:
        text = f"bench-{i}"
        params = {"name": "echo", "arguments": {"text": text}}
        message = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
        check_echo(await self.post(message, self.session_headers), text)
