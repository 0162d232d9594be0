"""The process's life around the server: the calls in flight, the way down (stop
accepting, drain, cut off what is left), SIGTERM/SIGINT, the watchdog that ends a
shutdown that hangs, and the collector tuned once startup is done."""

from __future__ import annotations

import asyncio
import gc
import importlib
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import structlog

from gateway.config.settings import SettingsError

if TYPE_CHECKING:
    from aiohttp import web

    from gateway.transport.http import Endpoint
    from gateway.transport.lane import Lane

__all__ = [
    "CLOSE_GRACE",
    "GC_YOUNG_THRESHOLD",
    "SHUTDOWN_MARGIN",
    "InFlight",
    "Signals",
    "StartupError",
    "freeze_startup_memory",
    "loop_factory",
    "start_unless",
    "stop_accepting",
    "unless",
    "watchdog",
    "watchdog_after",
]

log = structlog.get_logger(__name__)

# After the drain, how long aiohttp may take to close what is left (streams ending).
CLOSE_GRACE = 2.0
# After the drain deadline, how long the rest of the shutdown may take before the
# process is ended regardless (ending sessions, closing connections, reaping children).
SHUTDOWN_MARGIN = 5.0
# Net allocations between young-generation collections, once startup is frozen.
GC_YOUNG_THRESHOLD = 10_000
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class InFlight:
    """The work a drain waits for: client requests (POSTs) being handled, and calls
    answered on a stream (each endpoint's busy calls)."""

    def __init__(self, endpoints: Sequence[Endpoint]) -> None:
        # The gateway's own list: routes built later are seen too.
        self.endpoints = endpoints
        self.requests: set[asyncio.Task[Any]] = set()
        # Set by a second signal: the drain stops waiting.
        self.force = asyncio.Event()
        self.draining = False

    def count(self) -> int:
        return len(self.requests) + sum(len(e.busy()) for e in self.endpoints)

    def pending(self) -> set[asyncio.Future[Any]]:
        pending: set[asyncio.Future[Any]] = set(self.requests)
        for endpoint in self.endpoints:
            pending |= endpoint.busy()
        return pending

    async def wait(self, deadline_s: float) -> int:
        """Wait (up to ``deadline_s`` seconds, or until forced) for the work in flight.
        Returns how much was still running at the deadline."""
        deadline = time.monotonic() + deadline_s
        log.info("draining", in_flight=self.count(), drain_timeout=round(deadline_s, 1))
        force = asyncio.ensure_future(self.force.wait())
        try:
            while True:
                pending = self.pending()
                remaining = deadline - time.monotonic()
                if not pending or remaining <= 0 or self.force.is_set():
                    break
                await asyncio.wait(
                    {*pending, force}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
        finally:
            force.cancel()
        left = self.count()
        if left:
            log.warning("drain deadline passed; cancelling the calls left", in_flight=left)
        else:
            log.info("drained")
        return left

    async def cut_off(self) -> None:
        """Past the deadline: cancel the requests left rather than wait for aiohttp's grace."""
        left = set(self.requests)
        for task in left:
            task.cancel()
        await asyncio.wait(left, timeout=CLOSE_GRACE)


async def stop_accepting(
    runner: web.AppRunner | None,
    listener: asyncio.Server | None,
    lane: Lane | None,
    endpoints: Sequence[Endpoint],
) -> None:
    """No new connections; keep-alive connections end after their request; listens end."""
    if runner is not None:
        for site in list(runner.sites):
            await site.stop()
        if runner.server is not None:
            runner.server.pre_shutdown()  # keep-alive connections end after this request
    if listener is not None:
        listener.close()
    if lane is not None:
        lane.pre_shutdown()
    for endpoint in endpoints:
        # A listen lasts as long as its client: it would hold the drain to the deadline.
        endpoint.pipeline.end_listens()


class StartupError(Exception):
    """What stopped a start after the settings were found good (the cluster store
    unreachable): said in one line, without a traceback."""


async def unless(work: Coroutine[Any, Any, object], stop: asyncio.Event) -> bool:
    """``work`` to its end, unless ``stop`` is set first (a signal): then it is
    cancelled (its own ``finally`` blocks run) and False is returned."""
    task = asyncio.create_task(work)
    signalled = asyncio.create_task(stop.wait())
    stopped = False
    try:
        await asyncio.wait((task, signalled), return_when=asyncio.FIRST_COMPLETED)
    finally:
        signalled.cancel()
        if not task.done():
            stopped = task.cancel()
            await asyncio.wait((task,))
    if task.cancelled():
        return False
    if stopped and task.exception() is not None:
        # What it was in turned the cancellation into its own error (redis-py's
        # timeout): stopped all the same, and said so, not as that error.
        log.debug("stopped while it was starting", error=repr(task.exception()))
        return False
    task.result()  # its own failure, raised here
    return True


async def start_unless(
    start: Callable[[], Coroutine[Any, Any, object]],
    release: Callable[[], Awaitable[None]],
    stop: asyncio.Event,
    within: float,
) -> bool:
    """``start()``, unless ``stop`` is set first (a signal during start-up): then what
    it began is released, the process ending ``within`` seconds whatever holds the
    release up (a store that hangs), and False is returned (nothing to drain)."""
    armed = asyncio.create_task(watchdog_after(stop, within))  # a cancel may hang too
    try:
        started = await unless(start(), stop)
    except BaseException:
        armed.cancel()
        await release()
        raise
    if started:
        armed.cancel()
    else:
        log.info("stopped before it was ready")
        await release()
    return started


async def watchdog_after(stop: asyncio.Event, seconds: float) -> None:
    """The :func:`watchdog`, armed for ``seconds`` once ``stop`` is set."""
    await stop.wait()
    watchdog(seconds)


class Signals:
    """SIGTERM and SIGINT while in the ``with`` block: the first asks for a shutdown
    (:attr:`stop`), a second for not waiting for the calls in flight (``force``)."""

    def __init__(self, force: asyncio.Event) -> None:
        self.stop = asyncio.Event()
        self.force = force
        self._loop = asyncio.get_running_loop()

    def __enter__(self) -> Signals:
        for sig in SIGNALS:
            self._loop.add_signal_handler(sig, self._on_signal, sig.name)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sig in SIGNALS:
            self._loop.remove_signal_handler(sig)

    def _on_signal(self, name: str) -> None:
        if self.stop.is_set():
            log.warning("second signal: not waiting for the calls in flight", signal=name)
            self.force.set()
        else:
            log.info("shutting down", signal=name)
            self.stop.set()


def freeze_startup_memory() -> None:
    """What startup built (modules, schemas, routes) lives as long as the process: it
    is frozen out of the collector's sight, so a full collection no longer walks it.
    The young generation is collected less often: a call's own objects die by
    reference count, and CPython's default threshold collected it every few calls
    (the bench journal, round 5: `git show 3514f2e:bench/README.md`)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


def watchdog(seconds: float) -> None:
    """Whatever holds the shutdown up (a stuck upstream, a loop flooded with work), the
    process ends ``seconds`` from now: a daemon thread, so the loop need not run."""

    def hard_exit() -> None:
        sys.stderr.write(f"gateway: shutdown took over {seconds:g}s; exiting now\n")
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(seconds, hard_exit)
    timer.daemon = True
    timer.start()


def loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when asked for or (auto) installed; None: asyncio's own."""
    if choice == "asyncio":
        return None
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        if choice == "uvloop":
            raise SettingsError(
                "event_loop uvloop: uvloop is not installed (the gateway's `uvloop` extra)"
            ) from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory
