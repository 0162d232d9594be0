"""Deadlines: one timer per route cancels the calls past their time, not those whose
clock is paused while the upstream waits on the client.

On a virtual-time loop (tests/unit/virtual_time.py): how late a cancellation comes
is asserted exactly (at most one tick, a quarter of the budget)."""

from __future__ import annotations

import asyncio

from gateway.upstream.deadlines import MAX_TICK, Deadlines
from tests.unit.virtual_time import run


async def _cancelled_at(deadlines: Deadlines, *, pause: bool = False) -> tuple[str | None, float]:
    """A call that waits for ever: why and when (from its start) it was cancelled."""
    loop = asyncio.get_running_loop()
    seen: list[tuple[str | None, float]] = []

    async def call() -> None:
        started = loop.time()
        clock = deadlines.start()
        if pause:
            clock.pause()  # the upstream waits on a client that never answers
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append((clock.expired, loop.time() - started))
            raise
        finally:
            deadlines.stop(clock)

    task = asyncio.ensure_future(call())
    await asyncio.wait({task})
    assert task.cancelled()
    return seen[0]


def test_a_call_past_its_deadline_is_cancelled_within_a_tick_and_knows_why() -> None:
    why, after = run(_cancelled_at(Deadlines(2.0)))
    assert why == "timeout" and 2.0 <= after <= 2.0 + 0.5


def test_a_long_budget_is_checked_every_max_tick() -> None:
    why, after = run(_cancelled_at(Deadlines(100.0)))
    assert why == "timeout" and 100.0 <= after <= 100.0 + MAX_TICK


def test_a_paused_clock_is_not_cancelled_and_gets_its_time_back() -> None:
    async def scenario() -> tuple[float, float, str]:
        deadlines = Deadlines(2.0)
        clock = deadlines.start()
        due = clock.due
        clock.pause()  # the upstream waits on the client
        await asyncio.sleep(60)  # many ticks past the deadline: a person thinking
        clock.resume()
        given_back = clock.due - due
        await asyncio.sleep(1.0)  # within the budget left: runs on
        deadlines.stop(clock)
        return given_back, clock.waited, str(clock.expired)

    assert run(scenario()) == (60.0, 60.0, "None")


def test_a_stopped_clock_is_forgotten_and_the_timer_stops() -> None:
    async def scenario() -> tuple[str | None, bool]:
        deadlines = Deadlines(2.0)
        clock = deadlines.start()
        deadlines.stop(clock)
        await asyncio.sleep(10)
        stopped = deadlines._timer is None
        deadlines.close()
        return clock.expired, stopped

    assert run(scenario()) == (None, True)


def test_a_clock_paused_past_its_waits_is_cancelled_and_knows_why() -> None:
    """The pause has a bound of its own (the route's ask_timeout): a client that never
    answers does not hold the call open for ever."""
    why, after = run(_cancelled_at(Deadlines(600.0, waits=30.0), pause=True))
    assert why == "ask_timeout" and 30.0 <= after <= 30.0 + MAX_TICK
