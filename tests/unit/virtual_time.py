"""An event loop whose clock moves only when nothing is ready, straight to the next
timer: tests of timers (a heartbeat, a deadline) see hours pass at once and in the
same order every run, with no sleep in real time and no race against a busy machine.

For tests with no real I/O only: the clock would jump past a socket's reply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0

    def time(self) -> float:
        return self._now

    def _run_once(self) -> None:
        # Nothing to run now: the next timer's moment has come.
        if not self._ready and not self._stopping:  # type: ignore[attr-defined]
            due = [h.when() for h in self._scheduled if not h.cancelled()]  # type: ignore[attr-defined]
            if due:
                self._now = max(self._now, min(due))
        super()._run_once()  # type: ignore[misc]


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end on a fresh virtual-time loop."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()
