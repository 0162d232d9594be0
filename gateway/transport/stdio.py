"""The inbound stdio transport: the gateway as a local MCP server for one client.

I/O only, as for HTTP: which revision a line speaks is the AdapterSet's call,
what it means is the adapter's, what to do about it is the forwarder's.  One
line in is one JSON-RPC message (or, where the revision has them, a batch);
one line out is one answer, event or pushed ask.

The whole process is one client.  A handshake-era client gets one implicit
session when it initializes (there is no session id on stdio); a modern
client has none.  Calls run concurrently; ``notifications/cancelled`` cancels
the matching one (and no answer is written for it, as the spec asks).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
import structlog

from gateway.core import (
    Call,
    ClientReply,
    DecodeFailure,
    Event,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    Preamble,
    ServerProfile,
    SessionView,
)
from gateway.core import jsonrpc as rpc
from gateway.protocol import Adapter
from gateway.transport.common import (
    first_id,
    is_initialize,
    join_session,
    listen_id,
    observe,
    principal_of,
    push_asker,
    reporter,
    too_large,
    wanted,
)
from gateway.transport.route import Route
from gateway.transport.sessions import Session
from gateway.upstream.stdio import CHUNK, Oversized, encode_line, iter_lines

log = structlog.get_logger(__name__)

ReadFn = Callable[[int], Awaitable[bytes]]
WriteFn = Callable[[bytes], Awaitable[None]]

STDIO_SESSION_ID = "stdio"


class StdioServer:
    """Serves one stdio client: reads lines with ``serve(read)``, writes with ``write``.

    ``headers`` stand in for the HTTP request headers a stdio client cannot
    send (e.g. an ``authorization`` to forward upstream); they decide the
    principal and what is forwarded, as on HTTP.  At the end of input, calls
    still running get ``eof_grace`` seconds to finish (``printf ... | gateway
    stdio`` works), then are cancelled.
    """

    def __init__(
        self,
        route: Route,
        write: WriteFn,
        *,
        headers: Mapping[str, str] | None = None,
        eof_grace: float = 10.0,
    ) -> None:
        self.route = route
        self.adapters = route.adapters
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.principal = principal_of(self.headers)
        self.forwarded = {
            name: self.headers[name] for name in route.forward_headers if name in self.headers
        }
        self.eof_grace = eof_grace
        self.session: Session | None = None
        self._write = write
        self._write_lock = asyncio.Lock()
        self._broken = False
        self._inflight: dict[Any, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._log = structlog.get_logger(__name__, route=route.path, transport="stdio")

    # ------------------------------------------------------------ output

    async def send(self, message: Any) -> None:
        """Write one message (or batch) as one line; a vanished client is logged once."""
        data = encode_line(message)
        async with self._write_lock:
            if self._broken:
                return
            try:
                await self._write(data)
            except (ConnectionError, OSError, RuntimeError) as exc:
                self._broken = True
                self._log.warning("the stdio client stopped reading", error=str(exc))

    # ------------------------------------------------------------- input

    async def serve(self, read: ReadFn) -> None:
        """Read and answer lines until the end of input, then wind down."""
        try:
            async for line in iter_lines(read, self.route.max_body):
                if isinstance(line, Oversized):
                    adapter = self._session_adapter() or self.adapters.default_legacy
                    await self.send(adapter.encode_failure(None, too_large(self.route.max_body)))
                    continue
                if line.strip():
                    await self.handle_line(line)
        finally:
            await self._wind_down()

    async def _wind_down(self) -> None:
        running = set(self._inflight.values()) | self._background
        if running:
            _, pending = await asyncio.wait(running, timeout=self.eof_grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        if self.session is not None:
            self.session.close()

    def _session_adapter(self) -> Adapter | None:
        if self.session is None:
            return None
        return self.adapters.by_version.get(self.session.view.protocol_version)

    def _spawn(self, coro: Awaitable[None], key: Any = None) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        if key is not None:
            self._inflight[key] = task

            def done(finished: asyncio.Task[None]) -> None:
                if self._inflight.get(key) is finished:
                    del self._inflight[key]

            task.add_done_callback(done)
        else:
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def handle_line(self, line: bytes) -> None:
        """One inbound line: decode it, then answer, resolve, cancel or start calls."""
        session = self.session
        preamble = Preamble(
            body=None,
            headers=self.headers,
            transport="stdio",
            session=session.view if session is not None else None,
        )
        try:
            preamble.body = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            preamble.parse_error = f"Parse error: {exc}"
            failure = Failure(FailureKind.PARSE_ERROR, preamble.parse_error)
            await self.send(reporter(self.adapters, preamble).encode_failure(None, failure))
            return
        body = preamble.body
        selected = self.adapters.select(preamble)
        if isinstance(selected, Failure):
            if not rpc.is_notification(body):
                message = reporter(self.adapters, preamble).encode_failure(first_id(body), selected)
                await self.send(message)
            return
        adapter = selected
        if (
            session is not None
            and adapter.has_handshake
            and session.view.protocol_version != adapter.version
            and not is_initialize(body)
        ):
            adapter = self.adapters.by_version.get(session.view.protocol_version, adapter)

        items = adapter.decode(preamble)
        raw = body if isinstance(body, list) and len(body) == len(items) else [body] * len(items)
        requests: list[Call] = []
        answers: list[dict[str, Any]] = []
        for item, message in zip(items, raw, strict=True):
            if isinstance(item, DecodeFailure):
                if not rpc.is_notification(message):
                    answers.append(adapter.encode_failure(item.id, item.failure))
            elif isinstance(item, ClientReply):
                if self.session is None or not self.session.resolve(item.id, item.answer):
                    self._log.info("dropping a reply to no pending request", id=item.id)
            elif item.is_notification:
                self._notification(item, adapter)
            else:
                requests.append(item)

        if isinstance(body, list):
            if requests:
                self._spawn(self._answer_batch(requests, adapter, answers))
            elif answers:
                await self.send(answers)
            return
        for answer in answers:
            await self.send(answer)
        for call in requests:
            if call.operation is Operation.INITIALIZE:
                # Answered before reading on: what follows belongs to the new session.
                await self._initialize(call, adapter)
            elif call.id in self._inflight:
                failure = Failure(
                    FailureKind.INVALID_REQUEST, f"request id {call.id!r} is already in flight"
                )
                await self.send(adapter.encode_failure(call.id, failure, call.operation))
            else:
                self._spawn(self._answer(call, adapter), key=call.id)

    def _notification(self, call: Call, adapter: Adapter) -> None:
        if call.operation is Operation.INITIALIZED:
            if self.session is not None:
                self.session.view.initialized = True
            return
        if call.operation is Operation.CANCELLED:
            task = self._inflight.get(call.params.get("requestId"))
            if task is not None:
                task.cancel()
            return
        self._spawn(self._notify(call, adapter))

    # ------------------------------------------------------------- calls

    async def profile(self) -> ServerProfile:
        """What the upstream offers, with the route's caching hints (raises Failure)."""
        return await self.route.profile(self.principal, self.forwarded)

    async def _initialize(self, call: Call, adapter: Adapter) -> None:
        try:
            await self.profile()
        except Failure:
            pass  # _run words it; no session for a handshake that failed
        else:
            view = SessionView(
                STDIO_SESSION_ID, adapter.version, dict(call.client.capabilities), call.client.info
            )
            if self.session is None:
                self.session = Session(view, self.principal)
            else:
                self.session.view.protocol_version = view.protocol_version
                self.session.view.capabilities = view.capabilities
                self.session.view.info = view.info
            join_session(
                self.route.forwarder.subscriptions,
                self.route.path,
                self.session,
                self._session_adapter,
                self.send,
                await self.profile(),
                principal=self.principal,
                headers=self.forwarded,
                client=call.client,
                lists=True,  # stdout is always open
            )
        message = await self._run(call, adapter)
        if message is not None:
            await self.send(message)

    async def _answer(self, call: Call, adapter: Adapter) -> None:
        message = await self._run(call, adapter)
        if message is not None:
            await self.send(message)

    async def _answer_batch(
        self, calls: list[Call], adapter: Adapter, answers: list[dict[str, Any]]
    ) -> None:
        results = await asyncio.gather(*(self._run(call, adapter) for call in calls))
        answers = answers + [message for message in results if message is not None]
        if answers:
            await self.send(answers)

    async def _notify(self, call: Call, adapter: Adapter) -> None:
        try:
            profile = await self.profile()
            await self.route.forwarder.handle(call, self._exchange(call, adapter, profile))
        except Failure as failure:
            self._log.info("notification not forwarded", method=call.method, error=failure.message)
        except Exception:  # a notification has nobody to tell; log and move on
            self._log.exception("notification failed", method=call.method)

    async def _run(self, call: Call, adapter: Adapter) -> dict[str, Any] | None:
        started = time.perf_counter()
        outcome: Outcome
        try:
            profile = await self.profile()
        except Failure as failure:
            outcome = failure
            profile = ServerProfile()
        else:
            try:
                outcome = await self.route.forwarder.handle(
                    call, self._exchange(call, adapter, profile)
                )
            except Failure as failure:
                outcome = failure
        verdict = self.route.link.verdict
        observe(
            self.route.observers,
            self.route.path,
            verdict.adapter.version if verdict is not None else None,
            call,
            adapter,
            outcome,
            started,
        )
        return adapter.encode(call, profile, outcome)

    def _exchange(self, call: Call, adapter: Adapter, profile: ServerProfile) -> Exchange:
        session = self.session if adapter.has_handshake else None
        view = session.view if session is not None else None

        async def emit(event: Event) -> None:
            if not wanted(event, call, view):
                return
            message = adapter.encode_event(event, listen_id(call))
            if message is not None:
                await self.send(message)

        asker = None
        if session is not None:
            asker = push_asker(adapter, session, self.send, self.route.ask_timeout)

        return Exchange(
            call=call,
            route=self.route.path,
            profile=profile,
            principal=self.principal,
            request_id=uuid.uuid4().hex,
            forward_headers=self.forwarded,
            emit=emit,
            ask=asker,
            can_park=adapter.carries_state,
            session=view,
        )


async def serve_stdio(
    route: Route,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    headers: Mapping[str, str] | None = None,
    eof_grace: float = 10.0,
) -> None:
    """Serve one client on a stream pair (a socket, pipes) until its input ends."""

    async def write(data: bytes) -> None:
        writer.write(data)
        await writer.drain()

    server = StdioServer(route, write, headers=headers, eof_grace=eof_grace)
    await server.serve(reader.read)


# ------------------------------------------------------------------ the process's own stdio


def _threaded_reader(fd: int, loop: asyncio.AbstractEventLoop) -> ReadFn:
    """Reads ``fd`` in a daemon thread: works for pipes, files and terminals alike, and
    never sets O_NONBLOCK on a descriptor the parent shell may share.  Bounded: the
    thread waits while a few chunks are queued."""
    queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=4)

    def pump() -> None:
        data = b""
        try:
            while True:
                data = os.read(fd, CHUNK)
                asyncio.run_coroutine_threadsafe(queue.put(data), loop).result()
                if not data:
                    return
        except (OSError, RuntimeError, asyncio.CancelledError):
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(queue.put_nowait, b"")

    threading.Thread(target=pump, name="stdio-stdin", daemon=True).start()

    async def read(_: int) -> bytes:
        return await queue.get()

    return read


def _threaded_writer(fd: int) -> WriteFn:
    def write_all(data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    async def write(data: bytes) -> None:
        await asyncio.get_running_loop().run_in_executor(None, write_all, data)

    return write


async def run_stdio(
    route: Route,
    *,
    headers: Mapping[str, str] | None = None,
    protect_stdout: bool = True,
    eof_grace: float = 10.0,
) -> None:
    """Serve the client on this process's stdin and stdout (``gateway stdio``).

    With ``protect_stdout``, the protocol gets a private copy of stdout and
    file descriptor 1 is pointed at stderr, so nothing else (a stray print, a
    logger left on stdout) can corrupt the JSON-RPC stream.
    """
    loop = asyncio.get_running_loop()
    in_fd = sys.stdin.fileno()
    out_fd = sys.stdout.fileno()
    if protect_stdout:
        sys.stdout.flush()
        out_fd = os.dup(out_fd)
        os.dup2(sys.stderr.fileno(), 1)
    try:
        server = StdioServer(route, _threaded_writer(out_fd), headers=headers, eof_grace=eof_grace)
        await server.serve(_threaded_reader(in_fd, loop))
    finally:
        if protect_stdout:
            os.dup2(out_fd, 1)
            os.close(out_fd)
