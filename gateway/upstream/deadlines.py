"""A route's calls against its ``timeout``: a deadline for each call's whole time
upstream, kept by one timer per route (not one per call: a timer armed and
cancelled per call costs more than the check).

A call's clock pauses while the upstream waits on the client (a question it
asked is being answered): a person taking their time is no upstream's fault.  A
stream the upstream keeps alive with notifications or comments does not extend
it.  A call past its deadline has its task cancelled; :meth:`Clock.expired` tells
the call's own code that the cancellation was the deadline's, not the client's.
"""

from __future__ import annotations

import asyncio

# How often the route's timer looks at its calls, at most (and at least a quarter
# of the route's timeout, so a short timeout is kept close).
MAX_TICK = 1.0


class Clock:
    """One call's deadline."""

    __slots__ = ("_paused", "due", "expired", "paused_at", "task")

    def __init__(self, task: asyncio.Task[object] | None, due: float) -> None:
        self.task = task
        self.due = due
        self.expired = False
        self.paused_at = 0.0
        self._paused = 0

    @property
    def paused(self) -> bool:
        return self._paused > 0

    def pause(self) -> None:
        if self._paused == 0:
            self.paused_at = asyncio.get_running_loop().time()
        self._paused += 1

    def resume(self) -> None:
        self._paused -= 1
        if self._paused == 0:
            # The time it waited on the client is given back.
            self.due += asyncio.get_running_loop().time() - self.paused_at


class Deadlines:
    """The deadlines of one route's calls in flight (``budget`` seconds each)."""

    def __init__(self, budget: float) -> None:
        self.budget = budget
        self._tick = min(MAX_TICK, budget / 4)
        self._clocks: set[Clock] = set()
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> Clock:
        """The running task's call begins: its clock, running."""
        loop = asyncio.get_running_loop()
        clock = Clock(asyncio.current_task(), loop.time() + self.budget)
        self._clocks.add(clock)
        if self._timer is None:
            self._timer = loop.call_later(self._tick, self._check)
        return clock

    def stop(self, clock: Clock) -> None:
        self._clocks.discard(clock)

    def _check(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        for clock in [c for c in self._clocks if c.due <= now and not c.paused]:
            self._clocks.discard(clock)
            clock.expired = True
            if clock.task is not None:
                clock.task.cancel()
        if self._clocks:
            self._timer = loop.call_later(self._tick, self._check)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._clocks.clear()
