"""A recording HTTP hop in front of a real upstream: what the upstream was sent.

The gateway is pointed at the recorder, the recorder at the upstream.  Every
request is forwarded as it came (hop-by-hop headers dropped) and its answer
streamed back chunk by chunk (SSE too); every JSON-RPC request in a POST body is
noted as ``(method, name or uri, the Authorization header it came with)``.  It
runs on a loop of its own in a thread, on a port it binds itself (port 0, read
back).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
from aiohttp import web

HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
START_TIMEOUT = 10.0


class Recorder:
    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.seen: list[tuple[str, Any, str | None]] = []
        self.url = ""
        self._lock = threading.Lock()

    def calls(self, method: str, authorization: str | None = None) -> list[Any]:
        """The names (or URIs) of every ``method`` request the upstream was sent (with
        ``authorization``: by that caller only)."""
        with self._lock:
            return [
                name
                for seen, name, caller in self.seen
                if seen == method and (authorization is None or caller == authorization)
            ]

    def _note(self, body: bytes, authorization: str | None) -> None:
        try:
            message = json.loads(body)
        except ValueError:
            return
        for item in message if isinstance(message, list) else [message]:
            if isinstance(item, dict) and isinstance(item.get("method"), str):
                params = item.get("params") if isinstance(item.get("params"), dict) else {}
                with self._lock:
                    name = params.get("name", params.get("uri"))
                    self.seen.append((item["method"], name, authorization))

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._http is not None
        body = await request.read()
        if request.method == "POST":
            self._note(body, request.headers.get("Authorization"))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        async with self._http.request(
            request.method,
            self.target + request.path_qs,
            headers=headers,
            data=body or None,
            allow_redirects=False,
        ) as upstream:
            response = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in HOP},
            )
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except ConnectionResetError:  # the gateway closed its end (a GET stream)
                pass
            return response

    async def _serve(self, ready: threading.Event, stop: asyncio.Event) -> None:
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None),
        )
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        ready.set()
        try:
            await stop.wait()
        finally:
            await runner.cleanup()
            await self._http.close()


@contextmanager
def recording(target: str) -> Iterator[Recorder]:
    """A recorder forwarding to ``target`` (scheme, host and port; paths pass as they
    come), running until the block ends."""
    recorder = Recorder(target)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(recorder._serve(ready, stop))
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not ready.wait(START_TIMEOUT):
        raise RuntimeError("the recorder did not start")
    try:
        yield recorder
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(START_TIMEOUT)
