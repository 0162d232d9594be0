"""The long-lived things `bench.idle` holds open in a gateway: how each is opened and ended.

Every kind is opened the way its client opens it, over raw HTTP/1.1
(`bench.h1`), and checked (a session id came back, a stream's first event
arrived, a parked call was answered ``input_required``).  Routes of the
gateway under test (`bench.idle` starts it):

  /m  bench.upstreams' modern echo server (2026-07-28: the gateway keeps no upstream session)
  /l  the demo server (2025-11-25, handshake era: upstream sessions, elicitation)
  /s  bench.stdio_echo over stdio (a child per client session)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.h1 import Conn, Reply
from bench.wire import (
    CAPS,
    CLIENT_INFO,
    EVENT_STREAM,
    INFO,
    INITIALIZED,
    JSON,
    LEGACY,
    MODERN,
    PV,
    BadReply,
    check_echo,
    decode,
    initialize,
    modern_call,
    modern_headers,
    result_of,
)

OLDEST = "2024-11-05"  # the HTTP+SSE clients' revision
ACCEPT_BOTH = f"{JSON}, {EVENT_STREAM}"


@dataclass
class Target:
    """The gateway under test and a small pool of keep-alive connections for POSTs."""

    host: str
    port: int
    _idle: list[Conn] = field(default_factory=list)

    async def _take(self) -> Conn:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed.done() and conn.keep_alive:
                return conn
        return await Conn.open(self.host, self.port)

    @contextlib.asynccontextmanager
    async def conn(self) -> AsyncIterator[Conn]:
        conn = await self._take()
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        self._idle.append(conn)

    def drop_connections(self) -> None:
        """Close the pooled connections (between phases: an idle one would be cut
        by the gateway's keep-alive timeout, and must not count as held)."""
        for conn in self._idle:
            conn.close()
        self._idle.clear()

    async def post(self, path: str, headers: dict[str, str], message: Any) -> Reply:
        async with self.conn() as conn:
            return await conn.request("POST", path, headers, orjson.dumps(message))

    async def delete(self, path: str, headers: dict[str, str]) -> Reply:
        async with self.conn() as conn:
            return await conn.request("DELETE", path, headers)

    async def stream(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Conn:
        """A new connection whose response stays open, once its first bytes arrived."""
        conn = await Conn.open(self.host, self.port)
        try:
            reply = await conn.stream(method, path, headers, body)
            if reply.status != 200:
                raise BadReply(f"{method} {path}: HTTP {reply.status}")
            async with asyncio.timeout(30):
                await conn.wait_streamed(1)
            if conn.closed.done():
                raise BadReply(f"{method} {path}: the stream ended at once: {bytes(conn.kept)!r}")
        except BaseException:
            conn.close()
            raise
        return conn


def _session_headers(session_id: str, version: str) -> dict[str, str]:
    return {
        "Content-Type": JSON,
        "Accept": ACCEPT_BOTH,
        "Mcp-Session-Id": session_id,
        "MCP-Protocol-Version": version,
    }


async def open_session(target: Target, path: str, version: str = LEGACY) -> str:
    """initialize and initialized: a handshake-era session, its id."""
    opening = await target.post(
        path, {"Content-Type": JSON, "Accept": ACCEPT_BOTH}, initialize(version)
    )
    session_id = opening.headers.get("mcp-session-id")
    if opening.status != 200 or not session_id:
        raise BadReply(f"initialize: HTTP {opening.status}: {opening.body[:200]!r}")
    result = result_of(decode(opening.body, opening.content_type, 0))
    if result.get("protocolVersion") != version:
        raise BadReply(f"initialize negotiated {result.get('protocolVersion')!r}")
    done = await target.post(path, _session_headers(session_id, version), INITIALIZED)
    if done.status != 202:
        raise BadReply(f"notifications/initialized: HTTP {done.status}")
    return session_id


async def end_session(target: Target, path: str, session_id: str) -> None:
    reply = await target.delete(path, _session_headers(session_id, LEGACY))
    if reply.status != 200:
        raise BadReply(f"DELETE: HTTP {reply.status}: {reply.body[:200]!r}")


# ----------------------------------------------------------------------- the kinds


@dataclass
class Held:
    """One thing held open: what ending it needs."""

    session_id: str = ""
    conn: Conn | None = None
    state: dict[str, Any] = field(default_factory=dict)


Opener = Callable[[Target, int], Awaitable[Held]]
Ender = Callable[[Target, Held], Awaitable[None]]


async def _session_on(path: str, target: Target, i: int) -> Held:
    return Held(session_id=await open_session(target, path))


async def _end_session_on(path: str, target: Target, held: Held) -> None:
    await end_session(target, path, held.session_id)


async def open_get_stream(target: Target, i: int) -> Held:
    """A 2025-11-25 session and its standalone GET stream (primed: the first event)."""
    session_id = await open_session(target, "/m")
    headers = {**_session_headers(session_id, LEGACY), "Accept": EVENT_STREAM}
    conn = await target.stream("GET", "/m", headers, b"")
    return Held(session_id=session_id, conn=conn)


async def end_get_stream(target: Target, held: Held) -> None:
    assert held.conn is not None
    held.conn.close()
    await end_session(target, "/m", held.session_id)


async def open_sse_stream(target: Target, i: int) -> Held:
    """A 2024-11-05 client on HTTP+SSE: the stream and its `endpoint` event, then
    initialize (answered on the stream) and initialized."""
    conn = await target.stream("GET", "/m", {"Accept": EVENT_STREAM}, b"")
    try:
        endpoint = _endpoint(bytes(conn.kept))
        headers = {"Content-Type": JSON, "Accept": ACCEPT_BOTH}
        seen = conn.streamed
        reply = await target.post(endpoint, headers, initialize(OLDEST, i))
        if reply.status != 202:
            raise BadReply(f"HTTP+SSE initialize: HTTP {reply.status}: {reply.body[:200]!r}")
        async with asyncio.timeout(30):
            await conn.wait_streamed(seen + 1)  # the answer, on the stream
        reply = await target.post(endpoint, headers, INITIALIZED)
        if reply.status != 202:
            raise BadReply(f"HTTP+SSE initialized: HTTP {reply.status}")
    except BaseException:
        conn.close()
        raise
    return Held(conn=conn)


def _endpoint(head: bytes) -> str:
    for line in head.replace(b"\r\n", b"\n").split(b"\n"):
        if line.startswith(b"data:"):
            return line[5:].strip().decode()
    raise BadReply(f"no endpoint event on the HTTP+SSE stream: {head[:200]!r}")


async def close_stream(target: Target, held: Held) -> None:
    assert held.conn is not None
    held.conn.close()


async def open_listen(target: Target, i: int) -> Held:
    """A 2026-07-28 client's `subscriptions/listen` for tool list changes, acknowledged."""
    meta = {PV: MODERN, CAPS: {}, INFO: CLIENT_INFO}
    params = {"notifications": {"toolsListChanged": True}, "_meta": meta}
    message = {"jsonrpc": "2.0", "id": i, "method": "subscriptions/listen", "params": params}
    headers = modern_headers("subscriptions/listen")
    conn = await target.stream("POST", "/l", headers, orjson.dumps(message))
    return Held(conn=conn)


async def open_parked(target: Target, i: int) -> Held:
    """A 2026-07-28 client's `greet_me`: answered input_required, parked in the gateway."""
    reply = await target.post(
        "/l", modern_headers("tools/call", "greet_me"), modern_call(i, "greet_me", {})
    )
    if reply.status != 200:
        raise BadReply(f"greet_me: HTTP {reply.status}: {reply.body[:200]!r}")
    result = result_of(decode(reply.body, reply.content_type, i))
    if result.get("resultType") != "input_required" or "requestState" not in result:
        raise BadReply(f"expected input_required, got {str(result)[:300]}")
    return Held(state={"id": i, "asked": result})


async def end_parked(target: Target, held: Held) -> None:
    """The retry with the name: the parked call finishes."""
    asked = held.state["asked"]
    answers = {
        key: {"action": "accept", "content": {"name": "Bench"}}
        for key in asked.get("inputRequests") or {}
    }
    message = modern_call(held.state["id"], "greet_me", {})
    message["params"] |= {"inputResponses": answers, "requestState": asked["requestState"]}
    reply = await target.post("/l", modern_headers("tools/call", "greet_me"), message)
    if reply.status != 200:
        raise BadReply(f"greet_me retry: HTTP {reply.status}: {reply.body[:200]!r}")
    check_echo(decode(reply.body, reply.content_type, held.state["id"]), "Hello, Bench!")


async def open_pool(target: Target, i: int) -> Held:
    """A stateless client of a principal of its own (its bearer token) calls `echo`:
    the gateway opens a pooled upstream session for it."""
    headers = {**modern_headers("tools/call", "echo"), "Authorization": f"Bearer bench-pool-{i}"}
    text = f"pool-{i}"
    reply = await target.post("/l", headers, modern_call(i, "echo", {"text": text}))
    if reply.status != 200:
        raise BadReply(f"echo: HTTP {reply.status}: {reply.body[:200]!r}")
    check_echo(decode(reply.body, reply.content_type, i), text)
    return Held()


async def pools_expire(target: Target, held: Held) -> None:
    """Pools end on their own (idle expiry); nothing to send."""


@dataclass(frozen=True)
class Kind:
    key: str
    label: str
    open: Opener
    end: Ender
    gauge: str  # the /metrics gauge that counts them (summed over labels), or ""
    route: str
    stdio: bool = False  # counted by --stdio-count


KINDS = (
    Kind(
        "sessions",
        "2025-11-25 session, idle (stateless upstream: the gateway's own state only)",
        lambda t, i: _session_on("/m", t, i),
        lambda t, h: _end_session_on("/m", t, h),
        "gateway_sessions",
        "/m",
    ),
    Kind(
        "mirrored",
        "2025-11-25 session, idle, with its upstream session (handshake-era upstream)",
        lambda t, i: _session_on("/l", t, i),
        lambda t, h: _end_session_on("/l", t, h),
        "gateway_upstream_sessions",
        "/l",
    ),
    Kind(
        "get_streams",
        "2025-11-25 session with its GET stream open",
        open_get_stream,
        end_get_stream,
        "gateway_sessions",
        "/m",
    ),
    Kind(
        "sse_streams",
        "2024-11-05 client on HTTP+SSE (its stream is its session)",
        open_sse_stream,
        close_stream,
        "gateway_sessions",
        "/m",
    ),
    Kind(
        "listens",
        "2026-07-28 subscriptions/listen (handshake-era upstream, one principal)",
        open_listen,
        close_stream,
        "",
        "/l",
    ),
    Kind(
        "parked",
        "2026-07-28 call parked on input_required, not retried (handshake-era upstream)",
        open_parked,
        end_parked,
        "gateway_parked_calls",
        "/l",
    ),
    Kind(
        "pools",
        "2026-07-28 stateless pool (a principal each; upstream session, ends idle)",
        open_pool,
        pools_expire,
        "gateway_upstream_sessions",
        "/l",
    ),
    Kind(
        "stdio",
        "2025-11-25 session on a stdio route (a child process each)",
        lambda t, i: _session_on("/s", t, i),
        lambda t, h: _end_session_on("/s", t, h),
        "gateway_upstream_sessions",
        "/s",
        stdio=True,
    ),
)
BY_KEY = {kind.key: kind for kind in KINDS}


async def each(count: int, do: Callable[[int], Awaitable[Any]], concurrency: int) -> list[Any]:
    """``do(0) .. do(count - 1)``, ``concurrency`` at a time; their results in order.
    The first failure stops the rest and is raised."""
    results: list[Any] = [None] * count
    indices = iter(range(count))

    async def worker() -> None:
        for i in indices:
            results[i] = await do(i)

    async with asyncio.TaskGroup() as group:
        for _ in range(min(concurrency, count)):
            group.create_task(worker())
    return results
