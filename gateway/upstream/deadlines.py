"""The deadlines of one route's calls: one timer per route, not one per call (a
timer armed and cancelled per call costs more than the check).

A call's clock pauses while the upstream waits on the client, and the time
paused has its own bound (the route's ``ask_timeout``, in all for the call).  A
call past either has its task cancelled; ``Clock.expired`` says which bound it
was, so the call's own code can tell it from the client's cancellation.
"""

from __future__ import annotations

import asyncio

# How often the route's timer looks at its calls, at most (and at least a quarter
# of the route's timeout, so a short timeout is kept close).
MAX_TICK = 1.0


class Clock:
    """One call's deadline."""

    __slots__ = ("_paused", "due", "expired", "paused_at", "task", "waited", "waits")

    def __init__(self, task: asyncio.Task[object] | None, due: float, waits: float) -> None:
        self.task = task
        self.due = due
        self.expired: str | None = None  # why the call's time ran out
        self.paused_at = 0.0
        self._paused = 0
        # Time paused so far, and how much the call may be paused in all.
        self.waited = 0.0
        self.waits = waits

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
            waited = asyncio.get_running_loop().time() - self.paused_at
            self.due += waited
            self.waited += waited

    def out_of_time(self, now: float) -> str | None:
        """Why the call must end at ``now`` (None: it may go on)."""
        waited = self.waited + (now - self.paused_at if self.paused else 0.0)
        if waited >= self.waits:
            return "ask_timeout"  # waiting on the client, now or before, used it up
        return "timeout" if self.due <= now and not self.paused else None


class Deadlines:
    """The deadlines of one route's calls in flight (``budget`` seconds each, and
    ``waits`` seconds paused on the client at most)."""

    def __init__(self, budget: float, waits: float = float("inf")) -> None:
        self.budget = budget
        self.waits = waits
        self._tick = min(MAX_TICK, budget / 4)
        self._clocks: set[Clock] = set()
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> Clock:
        """The running task's call begins: its clock, running."""
        loop = asyncio.get_running_loop()
        # current_task(loop): without it, a second getpid system call on Python 3.11.
        clock = Clock(asyncio.current_task(loop), loop.time() + self.budget, self.waits)
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
        for clock in list(self._clocks):
            why = clock.out_of_time(now)
            if why is None:
                continue
            self._clocks.discard(clock)
            clock.expired = why
            if clock.task is not None:
                clock.task.cancel()
        if self._clocks:
            self._timer = loop.call_later(self._tick, self._check)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._clocks.clear()


def uncancel() -> int:
    """Take back a deadline's cancellation of the running task; how many are left."""
    task = asyncio.current_task()
    return task.uncancel() if task is not None else 0
