"""A quiet stream's keep-alive: one timer per open stream, re-armed, never a task that
waits.

A proxy between a client and the gateway (nginx's ``proxy_read_timeout`` of 60 s, a
cloud load balancer's idle timeout) cuts a response that sends nothing for a while.
An SSE answer that is open and quiet (a long call's, a listen's) is sent a comment
every ``every`` seconds of silence; a busy one never is.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable


class Heartbeat:
    """Calls ``beat()`` once nothing was written for ``every`` seconds, again after
    each further ``every`` seconds of silence, from ``start()`` to ``stop()``.
    A beat that fails (the client is gone) stops it."""

    def __init__(self, every: float, beat: Callable[[], Awaitable[None]]) -> None:
        self.every = every
        self._beat = beat
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._last = loop.time()
        self._arm(self.every)

    def wrote(self) -> None:
        """Something was written: the silence starts again (the timer is not moved)."""
        self._last = asyncio.get_running_loop().time()

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()

    def _arm(self, delay: float) -> None:
        if not self._stopped:
            self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        quiet = asyncio.get_running_loop().time() - self._last
        if quiet < self.every:
            self._arm(self.every - quiet)  # written meanwhile: wait out the rest
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            await self._beat()
        except (ConnectionError, RuntimeError, TimeoutError):
            self.stop()  # nobody is reading any more; the stream's owner will see it too
            return
        self._task = None
        self._last = asyncio.get_running_loop().time()
        self._arm(self.every)

    async def aclose(self) -> None:
        """Stop, and wait for a beat being written (tests)."""
        task = self._task
        self.stop()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task
