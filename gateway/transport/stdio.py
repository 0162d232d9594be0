"""The inbound stdio transport: the gateway as a local MCP server for one client.

One line in is one JSON-RPC message (or, where the revision has them, a batch):
one call into the pipeline (:meth:`Pipeline.receive`,
:mod:`gateway.transport.pipeline`) lets it in, in the order every transport
shares; its calls are then answered through :meth:`Runner.run`.  One line out is
one answer, event or pushed ask.

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
from collections.abc import Awaitable, Callable, Mapping
from concurrent import futures
from typing import Any

import structlog

from gateway.core import Call, DecodeFailure, Failure, FailureKind, Operation, Preamble
from gateway.core import jsonrpc as rpc
from gateway.protocol import Adapter
from gateway.transport.common import too_large
from gateway.transport.inbound import Arrival, Running, Send
from gateway.transport.pipeline import Pipeline, Refusal
from gateway.transport.route import Route
from gateway.transport.sessions import Session, SessionStore
from gateway.wire.lines import CHUNK, Oversized, encode_line, iter_lines

log = structlog.get_logger(__name__)

ReadFn = Callable[[int], Awaitable[bytes]]
WriteFn = Callable[[bytes], Awaitable[None]]


class StdioServer:
    """Serves one stdio client: reads lines with ``serve(read)``, writes with ``write``.

    ``headers`` stand in for the HTTP request headers a stdio client cannot
    send (e.g. an ``authorization`` to forward upstream); they decide the
    principal and what is forwarded, as on HTTP.  At the end of input, calls
    still running get ``eof_grace`` seconds to finish (``printf ... | gateway
    stdio`` works), then are cancelled.  ``stop`` set (a first signal) ends the
    input as its end would; ``force`` set (a second) ends the grace at once.
    """

    def __init__(
        self,
        route: Route,
        write: WriteFn,
        *,
        headers: Mapping[str, str] | None = None,
        eof_grace: float = 10.0,
        stop: asyncio.Event | None = None,
        force: asyncio.Event | None = None,
    ) -> None:
        self.route = route
        self.stop, self.force = stop, force
        self.adapters = route.adapters
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.eof_grace = eof_grace
        self.session: Session | None = None
        self._write = write
        self._write_lock = asyncio.Lock()
        self._broken = False
        # The process is one client: its session's stream is stdout, open from the
        # start; a call it cancels gets no answer.
        self.pipeline = Pipeline(
            route, SessionStore(), self._push, streams_open=True, answer_cancelled=False
        )
        # The client's calls in flight, by request id (what it may cancel).
        self.running: Running = {}
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

    async def _push(self, session: Session, message: dict[str, Any]) -> None:
        await self.send(message)

    # ------------------------------------------------------------- input

    async def serve(self, read: ReadFn) -> None:
        """Read and answer lines until the end of input (or ``stop``), then wind down."""
        stopped = asyncio.ensure_future(self.stop.wait()) if self.stop is not None else None
        if stopped is not None:
            read = _until(read, stopped)
        try:
            async for line in iter_lines(read, self.route.max_body):
                if isinstance(line, Oversized):
                    adapter = self.pipeline.session_adapter(self.session)
                    adapter = adapter or self.adapters.default_legacy
                    await self.send(adapter.encode_failure(None, too_large(self.route.max_body)))
                    continue
                if line.strip():
                    await self.handle_line(line)
        finally:
            if stopped is not None:
                stopped.cancel()
            await self._wind_down()

    async def _wind_down(self) -> None:
        """The calls in flight finish (within the grace, unless ``force``); whatever is
        left is cancelled and awaited, and the sessions end, even if this is cancelled:
        nothing may write to stdout or open an upstream session after it."""
        running = set(self.running.values()) | self.pipeline.tasks
        try:
            if running:
                await self._settle(running)
        finally:
            pending = {task for task in running if not task.done()}
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
            await self.pipeline.close()

    async def _settle(self, running: set[asyncio.Task[Any]]) -> None:
        waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(asyncio.wait(running))}
        if self.force is not None:
            waits.add(asyncio.ensure_future(self.force.wait()))
        try:
            await asyncio.wait(waits, timeout=self.eof_grace, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    async def handle_line(self, line: bytes) -> None:
        """One inbound line: in through the pipeline, then its answers written and its
        calls started."""
        preamble = Preamble(body=None, headers=self.headers, transport="stdio")
        arrival = await self.pipeline.receive(self, line, preamble)
        if arrival is None:
            return  # (a line has always arrived whole)
        if isinstance(arrival, Refusal):
            if not rpc.is_notification(preamble.body):
                await self.send(arrival.message())
            return
        if arrival.opened:
            self.session = arrival.session
        refused = _refused_items(arrival)
        requests = arrival.requests
        if isinstance(preamble.body, list):
            if requests:
                self.pipeline.spawn(self._answer_batch(arrival, refused))
            elif refused:
                await self.send(refused)
            return
        for response in refused:
            await self.send(response)
        for call in requests:
            if call.operation is Operation.INITIALIZE:
                await self._answer(arrival, call)
            elif call.id in self.running:
                failure = Failure(
                    FailureKind.INVALID_REQUEST, f"request id {call.id!r} is already in flight"
                )
                await self.send(arrival.adapter.encode_failure(call.id, failure, call.operation))
            else:
                self._start(arrival, call)

    # ------------------------------------------------ the pipeline's door

    # No Host or Origin, no credentials to check: the process is one client, with
    # one session (its own) and one set of calls in flight; a notification's events
    # go to stdout.
    guarded = False

    @property
    def own_session(self) -> Session | None:
        return self.session

    @property
    def events(self) -> Send:
        return self.send

    async def read(self, source: bytes, preamble: Preamble) -> bytes:
        return source

    def check_headers(
        self, adapter: Adapter, preamble: Preamble, session: Session | None
    ) -> Failure | None:
        return None

    def _start(self, arrival: Arrival, call: Call) -> None:
        """Answer ``call`` in a task of its own: the one its cancellation stops."""
        key = call.id
        assert key is not None
        task = self.pipeline.spawn(self._answer(arrival, call))
        self.running[key] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self.running.get(key) is finished:
                del self.running[key]

        task.add_done_callback(done)

    async def _answer(self, arrival: Arrival, call: Call) -> None:
        reply = await self.pipeline.run(arrival, call, self.send)
        if reply.message is not None:
            await self.send(reply.message)

    async def _answer_batch(self, arrival: Arrival, refused: list[dict[str, Any]]) -> None:
        responses = refused + await self.pipeline.run_all(arrival, arrival.requests, self.send)
        if responses:
            await self.send(responses)


def _refused_items(arrival: Arrival) -> list[dict[str, Any]]:
    """The error responses to the items that failed to decode: a notification's gets
    none, even when wrong."""
    body, items = arrival.preamble.body, arrival.items
    raw = body if isinstance(body, list) and len(body) == len(items) else [body] * len(items)
    return [
        arrival.adapter.encode_failure(item.id, item.failure)
        for item, message in zip(items, raw, strict=True)
        if isinstance(item, DecodeFailure) and not rpc.is_notification(message)
    ]


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


def _until(read: ReadFn, stopped: asyncio.Future[Any]) -> ReadFn:
    """``read``, answering the end of input once ``stopped`` is done."""

    async def read_until(size: int) -> bytes:
        if stopped.done():
            return b""
        reading = asyncio.ensure_future(read(size))
        await asyncio.wait((reading, stopped), return_when=asyncio.FIRST_COMPLETED)
        if reading.done():
            return reading.result()
        reading.cancel()
        return b""

    return read_until


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
        except futures.CancelledError:
            return  # the loop closed while a chunk waited to be queued: nothing reads
        except (OSError, RuntimeError, asyncio.CancelledError):
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_end_of_input, queue)

    threading.Thread(target=pump, name="stdio-stdin", daemon=True).start()

    async def read(_: int) -> bytes:
        return await queue.get()

    return read


def _end_of_input(queue: asyncio.Queue[bytes]) -> None:
    with contextlib.suppress(asyncio.QueueFull):  # full: its reader has stopped reading
        queue.put_nowait(b"")


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
    stop: asyncio.Event | None = None,
    force: asyncio.Event | None = None,
) -> None:
    """Serve the client on this process's stdin and stdout (``gateway stdio``), until
    the end of its input or ``stop`` (see :class:`StdioServer`).

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
        writer = _threaded_writer(out_fd)
        server = StdioServer(
            route, writer, headers=headers, eof_grace=eof_grace, stop=stop, force=force
        )
        await server.serve(_threaded_reader(in_fd, loop))
    finally:
        if protect_stdout:
            os.dup2(out_fd, 1)
            os.close(out_fd)
