"""A small bundled MCP server of the handshake era, for `gateway serve` with no route.

It exists so the gateway does something useful out of the box: a modern
client can talk to it through the gateway although it speaks only a legacy
revision (the newest one with an `initialize` handshake).  It is written with
the gateway's own adapters in their server role, over Streamable HTTP with
sessions, and asks its client for input the legacy way (a server-initiated
`elicitation/create` on the response stream).
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from gateway import __version__
from gateway.core import (
    Answer,
    Ask,
    AskKind,
    Call,
    ClientReply,
    DecodeFailure,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    Preamble,
    ServerProfile,
    SessionView,
    Value,
)
from gateway.protocol import Adapter, AdapterSet
from gateway.wire.sse import encode_event

TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "title": "Echo",
        "description": "Repeat the given text.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {
        "name": "add",
        "title": "Add",
        "description": "Add two integers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        "outputSchema": {
            "type": "object",
            "properties": {"sum": {"type": "integer"}},
            "required": ["sum"],
        },
    },
    {
        "name": "greet_me",
        "title": "Greet me",
        "description": "Asks for your name (elicitation), then greets you.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]
RESOURCES = [
    {
        "uri": "demo://readme",
        "name": "readme",
        "title": "About this demo",
        "mimeType": "text/plain",
    }
]
README_TEXT = (
    "This is the gateway's bundled demo server. It speaks only a handshake-era MCP "
    "revision; the gateway in front of it lets clients of every revision use it."
)
PROMPTS = [
    {
        "name": "greeting",
        "description": "A friendly greeting.",
        "arguments": [{"name": "name", "description": "Who to greet", "required": True}],
    }
]


@dataclass
class _Session:
    view: SessionView
    pending: dict[str, asyncio.Future[Answer]] = field(default_factory=dict)
    ids: int = 0


class DemoServer:
    """The demo upstream: one aiohttp app with `/mcp`."""

    def __init__(self) -> None:
        adapters = AdapterSet.default()
        self.adapters = adapters.only(a.version for a in adapters.handshake)
        self.adapter = self.adapters.handshake[0]
        self.profile = ServerProfile(
            info={"name": "gateway-demo", "title": "Gateway demo server", "version": __version__},
            capabilities={"tools": {}, "resources": {}, "prompts": {}},
            instructions="A demo server: try the echo, add and greet_me tools.",
        )
        self.sessions: dict[str, _Session] = {}

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/mcp", self.post)
        app.router.add_delete("/mcp", self.delete)
        return app

    async def delete(self, request: web.Request) -> web.Response:
        self.sessions.pop(request.headers.get("Mcp-Session-Id", ""), None)
        return web.Response(status=200)

    async def post(self, request: web.Request) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        session = self.sessions.get(headers.get("mcp-session-id", ""))
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return _json(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
                400,
            )
        preamble = Preamble(body=body, headers=headers, session=session.view if session else None)
        selected = self.adapters.select(preamble)
        adapter = selected if isinstance(selected, Adapter) else self.adapter
        items = adapter.decode(preamble)
        replies: list[dict[str, Any]] = []
        response_headers: dict[str, str] = {}
        for item in items:
            if isinstance(item, ClientReply):
                future = session.pending.pop(str(item.id), None) if session else None
                if future is not None and not future.done():
                    future.set_result(item.answer)
            elif isinstance(item, DecodeFailure):
                replies.append(adapter.encode_failure(item.id, item.failure))
            elif item.operation is Operation.INITIALIZE:
                view = SessionView(
                    secrets.token_urlsafe(24),
                    adapter.version,
                    item.client.capabilities,
                    item.client.info,
                )
                session = self.sessions[view.id] = _Session(view)
                response_headers["Mcp-Session-Id"] = view.id
                value = Value({"protocolVersion": adapter.version, **self._hello()})
                replies.append(adapter.encode(item, self.profile, value) or {})
            elif item.id is not None:
                if session is None:
                    failure = Failure(FailureKind.SESSION_REQUIRED, "missing session")
                    return _json(adapter.encode_failure(item.id, failure), 400)
                return await self._call(request, adapter, session, item)
        if not replies:
            return web.Response(status=202, headers=response_headers)
        return _json(replies[0], 200, response_headers)

    def _hello(self) -> dict[str, Any]:
        return {
            "capabilities": self.profile.capabilities,
            "serverInfo": self.profile.info,
            "instructions": self.profile.instructions,
        }

    async def _call(
        self, request: web.Request, adapter: Adapter, session: _Session, call: Call
    ) -> web.StreamResponse:
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)

        async def ask(question: Ask) -> Answer:
            session.ids += 1
            request_id = f"demo-{session.ids}"
            message = adapter.encode_ask(question, request_id)
            if message is None or not question.allowed_by(session.view.capabilities):
                return Answer.refusal(question.kind)
            future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
            session.pending[request_id] = future
            await stream.write(encode_event(orjson.dumps(message).decode(), event="message"))
            return await asyncio.wait_for(future, 300)

        outcome = await self._outcome(call, ask)
        message = adapter.encode(call, self.profile, outcome)
        await stream.write(encode_event(orjson.dumps(message).decode(), event="message"))
        await stream.write_eof()
        return stream

    async def _outcome(self, call: Call, ask: Any) -> Outcome:
        op, params = call.operation, call.params
        if op is Operation.PING:
            return Value({})
        if op is Operation.TOOLS_LIST:
            return Value({"tools": TOOLS})
        if op is Operation.RESOURCES_LIST:
            return Value({"resources": RESOURCES})
        if op is Operation.RESOURCES_TEMPLATES_LIST:
            return Value({"resourceTemplates": []})
        if op is Operation.PROMPTS_LIST:
            return Value({"prompts": PROMPTS})
        if op is Operation.RESOURCES_READ:
            if params.get("uri") != "demo://readme":
                return Failure(
                    FailureKind.RESOURCE_NOT_FOUND, "Resource not found", {"uri": params.get("uri")}
                )
            return Value(
                {
                    "contents": [
                        {"uri": "demo://readme", "mimeType": "text/plain", "text": README_TEXT}
                    ]
                }
            )
        if op is Operation.PROMPTS_GET:
            name = (params.get("arguments") or {}).get("name")
            if params.get("name") != "greeting" or not name:
                return Failure(
                    FailureKind.INVALID_PARAMS, "unknown prompt or missing argument 'name'"
                )
            text = f"Please greet {name} warmly."
            return Value(
                {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}
            )
        if op is Operation.TOOLS_CALL:
            return await self._tool(str(params.get("name")), params.get("arguments") or {}, ask)
        return Failure(FailureKind.UNKNOWN_METHOD, f"Method not found: {call.method}")

    async def _tool(self, name: str, arguments: dict[str, Any], ask: Any) -> Outcome:
        if name == "echo":
            return Value({"content": [{"type": "text", "text": str(arguments.get("text", ""))}]})
        if name == "add":
            a, b = arguments.get("a"), arguments.get("b")
            if not isinstance(a, int) or not isinstance(b, int):
                return Failure(FailureKind.INVALID_ARGUMENTS, "a and b must be integers")
            total = a + b
            return Value(
                {
                    "content": [{"type": "text", "text": str(total)}],
                    "structuredContent": {"sum": total},
                }
            )
        if name == "greet_me":
            question = Ask(
                AskKind.ELICIT,
                {
                    "message": "What is your name?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string", "title": "Your name"}},
                        "required": ["name"],
                    },
                },
            )
            answer = await ask(question)
            result = answer.result or {}
            if result.get("action") != "accept":
                text = f"No name given ({result.get('action', 'error')}); hello, stranger!"
            else:
                text = f"Hello, {(result.get('content') or {}).get('name', 'stranger')}!"
            return Value({"content": [{"type": "text", "text": text}]})
        return Failure(FailureKind.INVALID_PARAMS, f"Unknown tool: {name}")


def _json(
    message: dict[str, Any], status: int, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(message), status=status, content_type="application/json", headers=headers
    )


async def start_demo(host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, str]:
    """Start the demo server on loopback; returns its runner and its MCP URL."""
    runner = web.AppRunner(DemoServer().app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = port
    for address in runner.addresses:
        if isinstance(address, tuple):
            bound = int(address[1])
            break
    return runner, f"http://{host}:{bound}/mcp"
