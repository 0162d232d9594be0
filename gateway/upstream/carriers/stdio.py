"""The stdio carrier: an MCP server run as a child process.

The gateway starts the server (its own process group, so it can be stopped
whole), writes one JSON-RPC message per line to its stdin and reads one per
line from its stdout.  stdout is one shared channel: replies are sorted out
to their requests by :mod:`gateway.upstream.carriers.demux`, as for HTTP+SSE.  stderr
is free-form logging: it is read all the time (so the child never blocks on
it), logged line by line with the route's name, throttled, and never kept.

The process is the session.  When it exits, every request in flight fails
("the stdio server exited with code N") and requests keep failing until
``start()`` spawns a new one, which is a new session the caller must open
again (``generation`` tells them apart).  A child that crashed is restarted
with an exponential backoff.  With ``auto_restart`` (for servers that keep no
session, whose callers need not open anything first) a request restarts it
itself.

Line framing (:mod:`gateway.wire.lines`) is shared with the downstream stdio
transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import structlog

from gateway.core.jsonrpc import response_id
from gateway.core.jsonrpc import valid_id as is_id
from gateway.upstream.carriers.base import Carrier, CarrierError, Message, UpstreamReply, Where
from gateway.upstream.carriers.crashes import DEFAULT_BACKOFF, DEFAULT_BACKOFF_MAX, Crashes
from gateway.upstream.carriers.demux import (
    Demux,
    DropOldestQueue,
    Listening,
    ListenNamer,
    no_listen,
)
from gateway.wire.lines import CHUNK, Oversized, encode_line, iter_lines

DEFAULT_MAX_MESSAGE = 32 * 1024 * 1024
DEFAULT_MAX_STDERR_LINE = 8 * 1024
_EXCERPT = 200


class _Throttle:
    """A token bucket for log lines: a flooding child must not flood the log."""

    def __init__(self, rate: float, burst: int) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._last = time.monotonic()
        self.suppressed = 0

    def allow(self) -> bool:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        self.suppressed += 1
        return False

    def take_suppressed(self) -> int:
        count, self.suppressed = self.suppressed, 0
        return count


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's own protocol, plus an event set the moment the child exits.

    ``Process.wait()`` returns only once every pipe is closed too, which a
    grandchild holding stdout can put off forever; the exit itself is what
    the carrier must see.
    """

    def __init__(self, exited: asyncio.Event, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=CHUNK, loop=loop)
        self._exited = exited

    def process_exited(self) -> None:
        super().process_exited()
        self._exited.set()


@dataclass(eq=False)
class _Child:
    """One spawned server process and everything scoped to it (its session too)."""

    proc: asyncio.subprocess.Process
    transport: asyncio.SubprocessTransport
    exited: asyncio.Event
    demux: Demux
    log: Any
    # Looked up when the child starts (not bound at import): one clock with the
    # carrier's own reads of it, which tests replace.
    started: float = field(default_factory=lambda: time.monotonic())
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    closing: bool = False  # the carrier is stopping it: its exit is no crash
    dead: bool = False
    error: CarrierError | None = None
    stderr_lines: int = 0
    stderr_bytes: int = 0

    def fail(self, error: CarrierError) -> None:
        if self.dead:
            return
        self.dead = True
        self.error = error
        self.demux.shutdown(error)


def _signal_group(proc: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    # The child leads its own process group (start_new_session), so its pid is the
    # group id.  Once the leader is reaped its pid may be recycled by an unrelated
    # process that leads a group of its own, so the group is only signalled while
    # some member of it is still there: the leader, or (after it was reaped)
    # processes whose group is still this one and whose session it started.
    if proc.returncode is not None and not _group_alive(proc.pid):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _group_alive(pgid: int) -> bool:
    """Whether a process other than a group leader is in group ``pgid`` (/proc scan)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False
    for entry in entries:
        if not entry.isdigit() or int(entry) == pgid:
            continue  # a process with pid == pgid would be a new leader, not ours
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # fields: state, ppid, pgrp, session, ...
        if int(fields[2]) == pgid and int(fields[3]) == pgid:
            return True
    return False


async def _exited(child: _Child, timeout: float) -> bool:  # noqa: ASYNC109
    if child.exited.is_set():
        return True
    try:
        async with asyncio.timeout(timeout):
            await child.exited.wait()
    except TimeoutError:
        return False
    return True


# The longest back-off a call waits out in a crash loop (a longer one refuses at once).
BRIEF_WAIT = 0.1


class StdioCarrier(Carrier):
    """An MCP server spoken to over its stdin and stdout.

    ``argv`` is the command; ``env`` is added to the inherited environment
    (or replaces it with ``inherit_env=False``); ``cwd`` is its directory.
    ``route`` names the route in every log line.

    ``max_message_size`` bounds one stdout line (a longer one is logged and
    skipped); ``max_stderr_line`` truncates stderr lines and
    ``stderr_lines_per_second`` throttles their logging.  A crashed child is
    restarted by ``start()`` after ``backoff_initial`` seconds, doubling with
    each crash in a row up to ``backoff_max`` (a minute); a child that ran for
    ``healthy_after`` seconds before crashing starts the count afresh.  ``crashes``
    is the route's record when its children share one (see :mod:`.crashes`).
    ``close()`` closes stdin, waits ``close_timeout``, sends SIGTERM to the
    process group, waits ``term_timeout``, then sends SIGKILL, and reaps.
    ``read_timeout`` bounds the silence on a request's answer (None: unbounded).
    ``listen_named`` reads which listen in flight a message names (see
    :mod:`.demux`); the caller knows how the upstream's revision tags one.
    """

    cancels_by_close = False
    is_session = True

    def where(self) -> Where:
        return Where("pipe")

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        inherit_env: bool = True,
        route: str = "",
        max_message_size: int = DEFAULT_MAX_MESSAGE,
        max_queued: int = 1024,
        max_stderr_line: int = DEFAULT_MAX_STDERR_LINE,
        stderr_lines_per_second: float = 100.0,
        backoff_initial: float = DEFAULT_BACKOFF,
        backoff_max: float = DEFAULT_BACKOFF_MAX,
        crashes: Crashes | None = None,
        healthy_after: float = 30.0,
        close_timeout: float = 2.0,
        term_timeout: float = 2.0,
        exit_drain_timeout: float = 1.0,
        auto_restart: bool = False,
        read_timeout: float | None = None,
        listen_named: ListenNamer = no_listen,
    ) -> None:
        if not argv:
            raise ValueError("a stdio upstream needs a command")
        self.argv = [str(arg) for arg in argv]
        self.env = dict(env or {})
        self.cwd = cwd
        self.inherit_env = inherit_env
        self.route = route
        self.auto_restart = auto_restart
        self.read_timeout = read_timeout
        self._listen_named = listen_named
        self._max_message_size = max_message_size
        self._max_queued = max_queued
        self._max_stderr_line = max_stderr_line
        # Set while the era probe sends a request the server may not know.
        self.quiet_stderr = False
        self._stderr_rate = stderr_lines_per_second
        # The route's record of crashes (shared by its children), or this one's own.
        self.crashes = crashes or Crashes(backoff_initial, backoff_max)
        self._healthy_after = healthy_after
        self._close_timeout = close_timeout
        self._term_timeout = term_timeout
        self._exit_drain_timeout = exit_drain_timeout
        self._log = structlog.get_logger(__name__, route=route)
        self._child: _Child | None = None
        self._lock = asyncio.Lock()
        self._write_lock = asyncio.Lock()
        self._epoch = 0  # bumped by close(): a start() in progress then gives up
        self.restarts = 0
        self.generation = 0
        self.last_exit_code: int | None = None

    # ---------------------------------------------------------------- status

    @property
    def is_open(self) -> bool:
        child = self._child
        return child is not None and not child.dead

    @property
    def pid(self) -> int | None:
        child = self._child
        return child.proc.pid if child is not None and not child.dead else None

    @property
    def stderr_lines(self) -> int:
        """stderr lines the current child wrote (logged or throttled away)."""
        return self._child.stderr_lines if self._child is not None else 0

    @property
    def stderr_bytes(self) -> int:
        return self._child.stderr_bytes if self._child is not None else 0

    def backoff_delay(self) -> float:
        """How long ``start()`` would wait now before spawning."""
        return self.crashes.delay(time.monotonic())

    # ------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        async with self._lock:
            if self.is_open:
                return
            epoch = self._epoch
            delay = self.backoff_delay()
            if delay > BRIEF_WAIT and self.crashes.looping:  # no call kept waiting on it
                said = self.crashes.last_said()
                last = f"; its last stderr line: {said[-1]}" if said else ""
                failures = self.crashes.failures
                raise CarrierError(
                    f"its command {self.argv[0]!r} keeps exiting or failing to start"
                    f" ({failures} times in a row){last}",
                    not_started=True,
                )
            if delay > 0:
                self._log.info("restarting the stdio server after a backoff", delay=delay)
                await asyncio.sleep(delay)
            if epoch != self._epoch:
                raise CarrierError("the carrier was closed while starting")
            restart = self.crashes.failures > 0
            child = await self._spawn()
            if epoch != self._epoch:  # close() ran while we spawned
                await self._stop(child, CarrierError("the carrier was closed while starting"))
                raise CarrierError("the carrier was closed while starting")
            self._child = child
            if restart:
                self.restarts += 1

    async def _spawn(self) -> _Child:
        env = {**os.environ, **self.env} if self.inherit_env else dict(self.env)
        loop = asyncio.get_running_loop()
        exited = asyncio.Event()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _Protocol(exited, loop),
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=self.cwd,
                start_new_session=True,  # its own process group, stopped as one
            )
        except (OSError, ValueError) as exc:
            self._record_failure()
            raise CarrierError(
                f"could not start the stdio server {self.argv[0]!r}: {exc}", not_started=True
            ) from exc
        proc = asyncio.subprocess.Process(transport, protocol, loop)
        self.generation += 1
        log = structlog.get_logger(
            __name__, route=self.route, pid=proc.pid, generation=self.generation
        )
        demux = Demux(self._max_queued, "stdio", log, self._listen_named)
        child = _Child(proc, transport, exited, demux, log)
        reader = asyncio.create_task(self._read(child), name=f"stdio-reader-{proc.pid}")
        child.tasks = [
            reader,
            asyncio.create_task(self._read_stderr(child), name=f"stdio-stderr-{proc.pid}"),
            asyncio.create_task(self._watch(child, reader), name=f"stdio-watch-{proc.pid}"),
        ]
        log.info("stdio server started", argv=self.argv[0])
        return child

    def _record_failure(self, child: _Child | None = None) -> None:
        now = time.monotonic()
        # A child that ran well for a while before it went is no crash loop.
        self.crashes.failed(
            now, ran_well=child is not None and now - child.started >= self._healthy_after
        )

    async def close(self) -> None:
        self._epoch += 1
        child, self._child = self._child, None
        if child is not None:
            await self._stop(child, CarrierError("the carrier was closed"))

    async def _stop(self, child: _Child, error: CarrierError) -> None:
        """Shut the child down gracefully, then by force; reap it and its group."""
        child.closing = True
        child.fail(error)
        proc = child.proc
        if not child.exited.is_set():
            self._close_stdin(child)  # the graceful signal every server should heed
            if not await _exited(child, self._close_timeout):
                child.log.info("the stdio server ignored the end of its input: SIGTERM")
                _signal_group(proc, signal.SIGTERM)
                if not await _exited(child, self._term_timeout):
                    child.log.warning("the stdio server ignored SIGTERM: SIGKILL")
                    _signal_group(proc, signal.SIGKILL)
                    await _exited(child, self._term_timeout)
        await self._reap(child)

    async def _reap(self, child: _Child) -> None:
        """The leader has exited: end what it left in its group and our readers."""
        _signal_group(child.proc, signal.SIGKILL)
        self._close_stdin(child)
        self.last_exit_code = child.proc.returncode
        current = asyncio.current_task()
        tasks = [task for task in child.tasks if task is not current]
        # With the group gone the pipes close and the readers end.  Something that
        # left the group may still hold them: then close our ends ourselves.
        pending: set[asyncio.Task[None]] = set(tasks)
        if pending:
            _, pending = await asyncio.wait(pending, timeout=self._exit_drain_timeout)
        child.transport.close()
        if pending:
            _, pending = await asyncio.wait(pending, timeout=self._exit_drain_timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    @staticmethod
    def _close_stdin(child: _Child) -> None:
        stdin = child.proc.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(OSError, RuntimeError):
                stdin.close()

    # --------------------------------------------------------------- readers

    async def _read(self, child: _Child) -> None:
        assert child.proc.stdout is not None
        throttle = _Throttle(10.0, 20)
        try:
            async for line in iter_lines(child.proc.stdout.read, self._max_message_size):
                if isinstance(line, Oversized):
                    self._dropped(child, line)
                    continue
                if not line.strip():
                    continue
                try:
                    payload = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    if throttle.allow():
                        child.log.warning(
                            "skipping a stdout line that is not JSON",
                            error=str(exc),
                            excerpt=line[:_EXCERPT].decode(errors="replace"),
                            suppressed=throttle.take_suppressed(),
                        )
                    continue
                items = payload if isinstance(payload, list) else [payload]
                for item in items:
                    if isinstance(item, dict) and item.get("jsonrpc") == "2.0":
                        child.demux.route(item)
                    elif throttle.allow():
                        child.log.warning(
                            "skipping a stdout line that is not a JSON-RPC message",
                            excerpt=line[:_EXCERPT].decode(errors="replace"),
                            suppressed=throttle.take_suppressed(),
                        )
        except Exception:  # a bug here must not leave requests hanging: the watcher fails them
            child.log.exception("the stdio reader failed")

    def _dropped(self, child: _Child, line: Oversized) -> None:
        """A stdout line over the bound is dropped; when it begins as the answer to a
        request in flight, that request fails now instead of waiting out its deadline."""
        key = response_id(line.head)
        child.log.warning(
            "dropping a stdout line over the size limit",
            size=line.size,
            limit=self._max_message_size,
            answers=key,
        )
        error = CarrierError(
            f"the upstream's answer ({line.size} bytes) exceeds the route's bound of"
            f" {self._max_message_size} bytes (route option max_message)"
        )
        if key is not None:
            child.demux.fail(key, error)

    async def _read_stderr(self, child: _Child) -> None:
        assert child.proc.stderr is not None
        throttle = _Throttle(self._stderr_rate, max(1, int(self._stderr_rate * 2)))
        try:
            async for line in iter_lines(
                child.proc.stderr.read, self._max_stderr_line, truncate=True
            ):
                assert isinstance(line, bytes)
                child.stderr_lines += 1
                child.stderr_bytes += len(line) + 1
                text = line.rstrip().decode(errors="replace")
                if text.strip():
                    self.crashes.said(text)  # kept for the warning of its exit, /readyz
                if throttle.allow():
                    suppressed = throttle.take_suppressed()
                    # While the era probe runs, a legacy server's complaints about the
                    # modern request it was sent are expected: debug, not info.
                    say = child.log.debug if self.quiet_stderr else child.log.info
                    if suppressed:
                        say("stdio server stderr", line=text, suppressed=suppressed)
                    else:
                        say("stdio server stderr", line=text)
        except Exception:
            child.log.exception("the stdio stderr reader failed")
        suppressed = throttle.take_suppressed()
        if suppressed:
            child.log.info("stdio server stderr lines not logged", suppressed=suppressed)

    async def _watch(self, child: _Child, reader: asyncio.Task[None]) -> None:
        """Wait for the child to go; then fail its requests and clean up after it."""
        proc = child.proc
        exit_wait = asyncio.ensure_future(child.exited.wait())
        # A child that runs well for a while ends a crash loop: not ready no longer,
        # and its calls are not refused for crashes before it.
        well = asyncio.get_running_loop().call_later(self._healthy_after, self.crashes.recovered)
        try:
            await asyncio.wait({reader, exit_wait}, return_when=asyncio.FIRST_COMPLETED)
            if not exit_wait.done():
                # stdout closed first: a server that ends its output is leaving.
                await asyncio.wait({exit_wait}, timeout=self._exit_drain_timeout)
            if exit_wait.done():
                # What it wrote just before exiting is still in the pipe: deliver it.
                await asyncio.wait({reader}, timeout=self._exit_drain_timeout)
                error = CarrierError(f"the stdio server exited with code {proc.returncode}")
            else:
                error = CarrierError("the stdio server closed its stdout")
        finally:
            well.cancel()
            if not exit_wait.done():
                exit_wait.cancel()
        if child.closing:
            return
        child.fail(error)
        self._record_failure(child)
        child.log.warning(
            "the stdio server stopped",
            reason=str(error),
            last_stderr=self.crashes.last_said(),
            in_a_row=self.crashes.failures,
            next_start_in_s=round(self.crashes.delay(time.monotonic()), 1),
        )
        if child.exited.is_set():
            await self._reap(child)
        else:
            await self._stop(child, error)

    # -------------------------------------------------------------- messages

    def _current(self) -> _Child:
        child = self._child
        if child is not None and not child.dead:
            return child
        # Nothing is written to a child that is not there: the request was not sent.
        if child is None:
            raise CarrierError("the stdio server is not running (call start())", unreached=True)
        raise CarrierError(
            f"{child.error}; a new process is a new session: call start() again"
            if child.error is not None
            else "the stdio server is not running (call start())",
            unreached=True,
        )

    async def _ready(self) -> _Child:
        if self.auto_restart and not self.is_open:
            await self.start()
        return self._current()

    async def _write(self, child: _Child, message: Message) -> None:
        data = encode_line(message)
        stdin = child.proc.stdin
        assert stdin is not None
        async with self._write_lock:
            if child.dead:  # nothing was written: the request was not sent
                said = str(child.error or "the stdio server is not running")
                raise CarrierError(said, unreached=True)
            try:
                stdin.write(data)
            except (ConnectionError, RuntimeError, OSError) as exc:  # not written
                raise CarrierError(f"the stdio server is gone: {exc}", unreached=True) from exc
            # The pipe already closed as the line was written (the child gone, the
            # loop not told yet): nothing reached it.  Once written, it may have.
            unwritten = stdin.is_closing()
            try:
                await stdin.drain()
            except (ConnectionError, RuntimeError, OSError) as exc:
                said = f"could not write to the stdio server: {exc}"
                raise CarrierError(said, unreached=unwritten) from exc

    async def request(self, message: Message, headers: Mapping[str, str]) -> UpstreamReply:
        return await self._exchange(message, self.read_timeout, listen=False)

    async def stream(self, message: Message, headers: Mapping[str, str]) -> UpstreamReply:
        """A request whose answer may stay quiet for long (a listen): no silence bound."""
        return await self._exchange(message, None, listen=True)

    async def _exchange(
        self, message: Message, silence: float | None, *, listen: bool
    ) -> UpstreamReply:
        if not is_id(message.get("id")):
            raise ValueError("request() needs a JSON-RPC request with a string or integer id")
        child = await self._ready()
        # Registered before writing: the answer may come before drain() returns.
        key, queue = child.demux.register(message, listen=listen)
        try:
            await self._write(child, message)
        except BaseException:
            child.demux.forget(key, queue)
            raise

        async def messages() -> AsyncIterator[Message]:
            try:
                while (item := await self._next(queue, silence)) is not None:
                    yield item
            finally:
                child.demux.forget(key, queue)

        return UpstreamReply(200, {}, messages(), closer=Listening(child.demux, key, queue))

    async def _next(self, queue: DropOldestQueue, silence: float | None) -> Message | None:
        """The request's next message; silence longer than ``silence`` (the route's
        ``timeout=``, as for HTTP: between messages, not in all) is a timeout."""
        try:
            async with asyncio.timeout(silence):
                item: Message | None = await queue.get()
                return item
        except TimeoutError:
            raise CarrierError(
                f"the stdio server sent nothing for {silence:g}s", timeout=True
            ) from None

    async def send(self, message: Message, headers: Mapping[str, str]) -> None:
        await self._write(await self._ready(), message)

    async def listen(self, headers: Mapping[str, str]) -> AsyncIterator[Message] | None:
        """Messages tied to no request; ends when the process does.  One reader only."""
        queue = (await self._ready()).demux.unsolicited

        async def messages() -> AsyncIterator[Message]:
            while (item := await queue.get()) is not None:
                yield item

        return messages()

    async def terminate(self, headers: Mapping[str, str]) -> None:
        """The session is the process: see :meth:`close`."""
