"""Purpose-built misbehaving MCP upstreams: small aiohttp apps on loopback ports.

Each speaks just enough Streamable HTTP MCP to get past the gateway's era
probe and handshake, like a 2025-06-18 server: a request without a session is
refused with 400 (so the modern probe falls back), `initialize` is answered
with an `Mcp-Session-Id`, notifications get 202, `tools/list` lists `echo`.
Then `tools/call` does whatever the behaviour says:

  ok        answer `echo: <text>` (the well-behaved neighbour)
  hang      never answer (until teardown releases the handler)
  hang_sse  open an SSE response, send one notification, then go silent
  wedged    never answer, and from then on answer nothing at all (a stuck server)
  garbage   200 `application/json` whose body is not JSON
  html500   500 with an HTML error page
  reset     open an SSE response, send one notification, then reset the TCP connection

No sleeps anywhere: a handler that must hang waits on ``released``, an
asyncio.Event set at teardown; ``call_started`` tells the test a call arrived.

Run as a program (``python -m tests.e2e.fake_upstreams BEHAVIOUR``) it serves
on a free port in its own process, prints ``ready <url>`` and then ``call`` for
every tools/call, so a test can kill it mid-call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import sys
import uuid
from typing import Any

from aiohttp import web

BEHAVIOURS = ("ok", "hang", "hang_sse", "wedged", "garbage", "html500", "reset")
PROTOCOL_VERSION = "2025-06-18"


def _rpc_error(id_: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def _rpc_result(id_: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def _sse(message: dict[str, Any]) -> bytes:
    return f"event: message\ndata: {json.dumps(message)}\n\n".encode()


class FakeUpstream:
    """One fake MCP server; ``async with FakeUpstream("hang") as fake: fake.url``."""

    def __init__(self, behaviour: str, *, announce: bool = False) -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r} (known: {BEHAVIOURS})")
        self.behaviour = behaviour
        self.announce = announce
        self.released = asyncio.Event()
        self.call_started = asyncio.Event()
        self.calls = 0
        self.initializes = 0
        self.cancelled: list[Any] = []
        self._cancel_seen = asyncio.Condition()
        self.sessions: set[str] = set()
        self.url = ""
        self._runner: web.AppRunner | None = None

    # ------------------------------------------------------------ lifecycle

    async def start(self, port: int = 0) -> str:
        app = web.Application()
        app.router.add_route("*", "/mcp", self._handle)
        # handle_signals=False: several fakes share the test's loop.
        self._runner = web.AppRunner(
            app, handle_signals=False, access_log=None, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        bound = next(a[1] for a in self._runner.addresses if isinstance(a, tuple))
        self.url = f"http://127.0.0.1:{bound}/mcp"
        return self.url

    async def stop(self) -> None:
        self.released.set()  # let every hanging handler return
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeUpstream:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_cancelled(self, count: int, within: float) -> list[Any]:
        """Until ``count`` notifications/cancelled have arrived (bounded); their requestIds."""
        async with asyncio.timeout(within), self._cancel_seen:
            await self._cancel_seen.wait_for(lambda: len(self.cancelled) >= count)
        return list(self.cancelled)

    async def _record_cancel(self, message: dict[str, Any]) -> None:
        async with self._cancel_seen:
            self.cancelled.append((message.get("params") or {}).get("requestId"))
            self._cancel_seen.notify_all()

    # ------------------------------------------------------------- protocol

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self.behaviour == "wedged" and self.call_started.is_set():
            if request.method == "POST":
                with contextlib.suppress(ValueError):
                    message = json.loads(await request.read())
                    if isinstance(message, dict) and message.get("method") == (
                        "notifications/cancelled"
                    ):
                        await self._record_cancel(message)
            await self.released.wait()
            return web.Response(status=503)
        if request.method == "DELETE":
            self.sessions.discard(request.headers.get("Mcp-Session-Id", ""))
            return web.Response(status=200)
        if request.method != "POST":
            return web.Response(status=405, headers={"Allow": "POST, DELETE"})
        try:
            message = json.loads(await request.read())
        except ValueError:
            return web.json_response(_rpc_error(None, -32700, "Parse error"), status=400)
        if not isinstance(message, dict):
            return web.json_response(_rpc_error(None, -32600, "Invalid Request"), status=400)
        method = message.get("method")
        id_ = message.get("id")
        session = request.headers.get("Mcp-Session-Id")
        if method == "initialize":
            self.initializes += 1
            session = uuid.uuid4().hex
            self.sessions.add(session)
            result = {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": f"fake-{self.behaviour}", "version": "0"},
            }
            return web.json_response(_rpc_result(id_, result), headers={"Mcp-Session-Id": session})
        if session is None:
            # What a 2025-era SDK server answers to a request outside a session.
            return web.json_response(
                _rpc_error(None, -32600, "Bad Request: No valid session ID provided"), status=400
            )
        if session not in self.sessions:
            return web.json_response(_rpc_error(None, -32001, "Session not found"), status=404)
        if id_ is None:  # a notification
            if method == "notifications/cancelled":
                await self._record_cancel(message)
            return web.Response(status=202)
        if method == "ping":
            return web.json_response(_rpc_result(id_, {}))
        if method == "tools/list":
            tool = {
                "name": "echo",
                "description": "Echo text",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
            }
            return web.json_response(_rpc_result(id_, {"tools": [tool]}))
        if method == "tools/call":
            self.calls += 1
            self.call_started.set()
            if self.announce:
                print("call", flush=True)
            return await self._call(request, id_, message.get("params") or {})
        return web.json_response(_rpc_error(id_, -32601, f"Method not found: {method}"))

    async def _call(
        self, request: web.Request, id_: Any, params: dict[str, Any]
    ) -> web.StreamResponse:
        behaviour = self.behaviour
        if behaviour == "ok":
            text = str((params.get("arguments") or {}).get("text", ""))
            result = {"content": [{"type": "text", "text": f"echo: {text}"}]}
            return web.json_response(_rpc_result(id_, result))
        if behaviour in ("hang", "wedged"):
            await self.released.wait()
            return web.json_response(_rpc_error(id_, -32603, "released at teardown"))
        if behaviour == "garbage":
            return web.Response(body=b"this is {not JSON at all", content_type="application/json")
        if behaviour == "html500":
            page = "<html><body><h1>500 Internal Server Error</h1></body></html>"
            return web.Response(status=500, text=page, content_type="text/html")
        # The SSE behaviours: a response stream that starts well.
        stream = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await stream.prepare(request)
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "working on it"},
        }
        await stream.write(_sse(note))
        if behaviour == "hang_sse":
            await self.released.wait()
            return stream
        assert behaviour == "reset"
        _reset(request)
        return stream


def _reset(request: web.Request) -> None:
    """Drop the connection with a TCP RST (SO_LINGER 0), mid-body."""
    transport = request.transport
    assert transport is not None
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def _main(behaviour: str, port: int) -> None:
    fake = FakeUpstream(behaviour, announce=True)
    url = await fake.start(port)
    print("ready", url, flush=True)
    await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    # python -m tests.e2e.fake_upstreams BEHAVIOUR [PORT]
    asyncio.run(_main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0))
