"""One load-generating process of `bench.scale`, driven over its stdin and stdout.

    python -m bench.scaleload        # (bench.scale starts several; uvloop when installed)

Commands, one JSON object a line on stdin; one JSON answer a line on stdout:

  {"op": "prepare", "key": K, "revision": R, "urls": [...], "connections": C, "warmup": W}
      C keep-alive connections (`bench.h1`), spread over the URLs in turn; a
      2025-11-25 client opens a session on each (as many clients would, each
      with its own: no session is shared between connections, so none is ever
      relayed between the gateway's workers); then W calls on each.
  {"op": "run", "key": K, "calls": N}
      N ``tools/call echo`` over K's connections, one caller per connection, every
      answer checked; answers ok, errors, the first error, seconds taken, each
      call's latency (us) and this process's CPU seconds meanwhile.
  {"op": "quit"}

Cheap on purpose: a request's head is built once per connection, the body is one
orjson call, the answer is parsed by httptools and checked with orjson.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from bench.h1 import Conn
from bench.wire import (
    EVENT_STREAM,
    INITIALIZED,
    JSON,
    MODERN,
    BadReply,
    check_echo,
    decode,
    initialize,
    modern_call,
    modern_headers,
)


@dataclass
class Caller:
    """One connection and what its requests carry."""

    conn: Conn
    path: str
    revision: str
    headers: dict[str, str]

    @classmethod
    async def open(cls, url: str, revision: str) -> Caller:
        parts = urlsplit(url)
        conn = await Conn.open(parts.hostname or "127.0.0.1", parts.port or 80)
        caller = cls(conn, parts.path, revision, modern_headers("tools/call", "echo"))
        if revision != MODERN:
            await caller._handshake()
        return caller

    async def _reopen(self) -> None:
        """The server closed the idle connection between cells: a new one (and, for a
        session client, a new session: one that lives on the worker this one reached)."""
        self.conn = await Conn.open(self.conn.host, self.conn.port)
        if self.revision != MODERN:
            await self._handshake()

    async def _handshake(self) -> None:
        base = {"Content-Type": JSON, "Accept": f"{JSON}, {EVENT_STREAM}"}
        reply = await self.conn.request(
            "POST", self.path, base, orjson.dumps(initialize(self.revision))
        )
        session_id = reply.headers.get("mcp-session-id")
        if reply.status != 200 or not session_id:
            raise BadReply(f"initialize: HTTP {reply.status}: {reply.body[:200]!r}")
        self.headers = {**base, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": self.revision}
        done = await self.conn.request("POST", self.path, self.headers, orjson.dumps(INITIALIZED))
        if done.status != 202:
            raise BadReply(f"notifications/initialized: HTTP {done.status}")

    async def echo(self, i: int) -> None:
        if self.conn.closed.done() or not self.conn.keep_alive:
            await self._reopen()
        text = f"bench-{i}"
        if self.revision == MODERN:
            message = modern_call(i, "echo", {"text": text})
        else:
            params = {"name": "echo", "arguments": {"text": text}}
            message = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
        reply = await self.conn.request("POST", self.path, self.headers, orjson.dumps(message))
        if reply.status != 200:
            raise BadReply(f"HTTP {reply.status}: {reply.body[:200]!r}")
        check_echo(decode(reply.body, reply.content_type, i), text)


class Loader:
    def __init__(self) -> None:
        self.callers: dict[str, list[Caller]] = {}
        self.ids = itertools.count(1)

    async def prepare(self, command: dict[str, Any]) -> dict[str, Any]:
        urls, revision = command["urls"], command["revision"]
        count = int(command["connections"])
        callers = await asyncio.gather(
            *(Caller.open(urls[n % len(urls)], revision) for n in range(count))
        )
        self.callers[command["key"]] = list(callers)
        for _ in range(int(command.get("warmup", 0))):
            await asyncio.gather(*(caller.echo(next(self.ids)) for caller in callers))
        return {"ok": True, "connections": len(callers)}

    async def run(self, command: dict[str, Any]) -> dict[str, Any]:
        callers = self.callers[command["key"]]
        left = int(command["calls"])
        cap = float(command.get("time_cap_s", 60.0))
        latencies: list[int] = []
        errors = 0
        first_error = ""
        started = time.perf_counter()
        cpu = time.process_time()

        async def one(caller: Caller) -> None:
            nonlocal left, errors, first_error
            while left > 0 and time.perf_counter() - started < cap:
                left -= 1
                t0 = time.perf_counter()
                try:
                    await caller.echo(next(self.ids))
                except Exception as exc:  # counted, and this connection stops
                    errors += 1
                    first_error = first_error or f"{type(exc).__name__}: {exc}"[:300]
                    return
                latencies.append(round((time.perf_counter() - t0) * 1e6))

        await asyncio.gather(*(one(caller) for caller in callers))
        return {
            "ok": len(latencies),
            "errors": errors,
            "first_error": first_error,
            "elapsed_s": time.perf_counter() - started,
            "cpu_s": time.process_time() - cpu,
            "latencies_us": latencies,
        }

    def close(self) -> None:
        for callers in self.callers.values():
            for caller in callers:
                caller.conn.close()


async def serve() -> None:
    loader = Loader()
    loop = asyncio.get_running_loop()
    try:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            command = json.loads(line)
            op = command.get("op")
            if op == "quit":
                break
            try:
                answer = await (loader.prepare(command) if op == "prepare" else loader.run(command))
            except Exception as exc:  # told to the coordinator, which stops the run
                answer = {"failed": f"{type(exc).__name__}: {exc}"[:500]}
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
    finally:
        loader.close()


def main() -> None:
    try:
        import uvloop
    except ImportError:  # a cheaper loop if there is one; asyncio's own otherwise
        asyncio.run(serve())
    else:
        uvloop.run(serve())


if __name__ == "__main__":
    main()
