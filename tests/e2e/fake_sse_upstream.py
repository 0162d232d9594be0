"""A misbehaving MCP server on the old HTTP+SSE transport (2024-11-05): ``GET /sse``
opens a stream whose first event names the endpoint; each POST there is accepted (202)
and answered on that stream.  ``initialize``, ``tools/list`` (``echo``) and ``ping``
are answered; ``tools/call`` does what ``behaviour`` says (it can be changed between
calls):

  ok       answer `echo: <text>`
  hang     never answer (until teardown)
  drop     end the stream once the call arrived: the tool ran, its answer is lost
  garbage  an event whose data is not JSON, then nothing

Every call and every notifications/cancelled is recorded; no sleeps (a hanging
handler waits on ``released``).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from aiohttp import web

from gateway.wire.sse import encode_event

BEHAVIOURS = ("ok", "hang", "drop", "garbage")


class FakeSseUpstream:
    """``async with FakeSseUpstream("drop") as fake: fake.url`` (the GET stream's URL)."""

    def __init__(self, behaviour: str) -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r} (known: {BEHAVIOURS})")
        self.behaviour = behaviour
        self.url = ""
        self.calls: list[Any] = []  # the arguments' text of every tools/call, in order
        self.cancelled: list[Any] = []
        self.streams_opened = 0
        self.call_arrived = asyncio.Event()
        self.released = asyncio.Event()
        self._cancel_seen = asyncio.Condition()
        self._streams: dict[str, asyncio.Queue[bytes | None]] = {}
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> FakeSseUpstream:
        app = web.Application()
        app.router.add_get("/sse", self._stream)
        app.router.add_post("/messages", self._post)
        self._runner = web.AppRunner(
            app, handle_signals=False, access_log=None, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = next(a[1] for a in self._runner.addresses if isinstance(a, tuple))
        self.url = f"http://127.0.0.1:{port}/sse"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.released.set()
        for queue in self._streams.values():
            queue.put_nowait(None)
        if self._runner is not None:
            await self._runner.cleanup()

    async def wait_cancelled(self, count: int, within: float) -> list[Any]:
        """Until ``count`` notifications/cancelled arrived (bounded); their requestIds."""
        async with asyncio.timeout(within), self._cancel_seen:
            await self._cancel_seen.wait_for(lambda: len(self.cancelled) >= count)
        return list(self.cancelled)

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        self.streams_opened += 1
        session = uuid.uuid4().hex
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._streams[session] = queue
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(encode_event(f"/messages?session_id={session}", event="endpoint"))
        try:
            while (frame := await queue.get()) is not None:
                await response.write(frame)
        finally:
            self._streams.pop(session, None)
        return response

    async def _post(self, request: web.Request) -> web.Response:
        queue = self._streams.get(request.query.get("session_id", ""))
        if queue is None:
            return web.Response(status=404, text="no such session")
        message = json.loads(await request.read())
        method, id_ = message.get("method"), message.get("id")
        if method == "notifications/cancelled":
            async with self._cancel_seen:
                self.cancelled.append((message.get("params") or {}).get("requestId"))
                self._cancel_seen.notify_all()
        if id_ is None or "method" not in message:
            return web.Response(status=202)
        if method == "tools/call":
            self._call(queue, id_, message.get("params") or {})
        else:
            queue.put_nowait(_event(_answer(id_, method)))
        return web.Response(status=202)

    def _call(self, queue: asyncio.Queue[bytes | None], id_: Any, params: dict[str, Any]) -> None:
        text = str((params.get("arguments") or {}).get("text", ""))
        self.calls.append(text)
        self.call_arrived.set()
        if self.behaviour == "ok":
            result = {"content": [{"type": "text", "text": f"echo: {text}"}]}
            queue.put_nowait(_event({"jsonrpc": "2.0", "id": id_, "result": result}))
        elif self.behaviour == "drop":
            queue.put_nowait(None)  # the stream ends: whatever it would have said is lost
        elif self.behaviour == "garbage":
            queue.put_nowait(b"event: message\ndata: {not json\n\n")
        # hang: nothing, ever


def _event(message: dict[str, Any]) -> bytes:
    return encode_event(json.dumps(message), event="message")


def _answer(id_: Any, method: Any) -> dict[str, Any]:
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": "2024-11-05",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fake-sse", "version": "0"},
        }
    elif method == "tools/list":
        tool = {"name": "echo", "inputSchema": {"type": "object"}}
        result = {"tools": [tool]}
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return {"jsonrpc": "2.0", "id": id_, "error": error}
    return {"jsonrpc": "2.0", "id": id_, "result": result}
