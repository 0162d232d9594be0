"""Upstreams whose answer to a tool call is whatever the test says, byte for byte.

``HostileHttp`` is a raw HTTP/1.1 server (asyncio streams on a thread of its own, no
framework to tidy what it writes): it speaks enough MCP to open a session (initialize,
notifications, tools/list, DELETE) and answers ``tools/call`` with ``answer`` as it is,
status line, headers and body, then closes.  Under ``/modern`` it is a stateless
(2026-07-28) server the same way (``server/discover`` and ``tools/list``, no session).
On ``GET /sse`` it is an HTTP+SSE (2024-11-05) server whose ``endpoint`` event says
``endpoint``; its POSTs' answers then go on that stream, the tool call's framed as
``sse_answer`` says.

``python -m tests.security.hostile_upstream FILE`` is the stdio one: a 2025-11-25
server that answers ``tools/call`` with the bytes in FILE (read at each call).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Any

ID = b"{ID}"  # in an answer: the request's id, as JSON
VERSION = "2025-11-25"
MODERN = "2026-07-28"
TOOLS = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}


def _result(message: dict[str, Any], version: str) -> dict[str, Any] | None:
    method = message.get("method")
    if method == "initialize":
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "0"},
        }
    if method == "server/discover":
        info = {"io.modelcontextprotocol/serverInfo": {"name": "hostile", "version": "0"}}
        return {"supportedVersions": [version], "capabilities": {"tools": {}}, "_meta": info}
    if method == "tools/list":
        return TOOLS
    if method == "ping":
        return {}
    return None


def _json(status: int, body: Any, extra: str = "") -> bytes:
    data = json.dumps(body).encode()
    head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}"
    return f"{head}Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data


class HostileHttp:
    def __init__(self) -> None:
        self.answer = b""
        self.endpoint = b"/messages?session=1"
        self.sse_answer = b""
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._streams: list[asyncio.StreamWriter] = []
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> str:
        self._thread.start()
        server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self.loop
        ).result(10)
        self.port = server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        async def end() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(end(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            line, *fields = head.decode("latin-1").split("\r\n")
            method, target = line.split(" ")[:2]
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)
            }
            body = await reader.readexactly(int(headers.get("content-length") or 0))
            if method == "GET" and target.startswith("/sse"):
                await self._sse(writer)
                return
            writer.write(self._answer(method, target, body))
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()

    def _answer(self, method: str, target: str, body: bytes) -> bytes:
        if method != "POST":
            return _json(200 if method == "DELETE" else 405, {})
        message = json.loads(body)
        if target.startswith("/messages"):  # HTTP+SSE: the answer goes on the stream
            self.loop.create_task(self._push(message))
            return b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        if "id" not in message:
            return b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        modern = target.startswith("/modern")
        result = _result(message, MODERN if modern else VERSION)
        if result is not None:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            return _json(200, reply, "" if modern else "Mcp-Session-Id: s1\r\n")
        return self.answer.replace(ID, json.dumps(message["id"]).encode())

    async def _sse(self, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n"
            b"event: endpoint\r\ndata: " + self.endpoint + b"\r\n\r\n"
        )
        await writer.drain()
        self._streams.append(writer)
        try:
            await asyncio.sleep(3600)  # until the gateway hangs up, or the test ends
        finally:
            self._streams.remove(writer)

    async def _push(self, message: dict[str, Any]) -> None:
        if "id" not in message or not self._streams:
            return
        result = _result(message, "2024-11-05")
        if result is not None:
            reply = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
            data = b"event: message\r\ndata: " + reply.encode() + b"\r\n\r\n"
        else:
            data = self.sse_answer.replace(ID, json.dumps(message["id"]).encode())
        for stream in list(self._streams):
            stream.write(data)


def stdio_main(answer_file: Path, version: str = VERSION) -> None:
    """The stdio server: a line in, a line out; a tool call's answer is the file's bytes.
    ``version``: 2026-07-28 makes it a stateless server (``--modern``)."""
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message:
            continue
        result = _result(message, version)
        if result is not None:
            out.write(
                json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
            )
            out.write(b"\n")
        else:
            out.write(answer_file.read_bytes().replace(ID, json.dumps(message["id"]).encode()))
        out.flush()


if __name__ == "__main__":
    stdio_main(Path(sys.argv[1]), MODERN if "--modern" in sys.argv[2:] else VERSION)
