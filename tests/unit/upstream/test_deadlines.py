"""Deadlines: one timer per route cancels the calls past their time, not those whose
clock is paused while the upstream waits on the client."""

from __future__ import annotations

import asyncio

from gateway.upstream.deadlines import Deadlines


async def test_a_call_past_its_deadline_is_cancelled_and_knows_why() -> None:
    deadlines = Deadlines(0.05)
    seen: list[str | None] = []

    async def call() -> None:
        clock = deadlines.start()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append(clock.expired)
            raise
        finally:
            deadlines.stop(clock)

    task = asyncio.ensure_future(call())
    done, _ = await asyncio.wait({task}, timeout=5)
    assert done and task.cancelled() and seen == ["timeout"]


async def test_a_paused_clock_is_not_cancelled_and_gets_its_time_back() -> None:
    deadlines = Deadlines(0.05)
    resumed = asyncio.Event()
    outcome: list[str] = []

    async def call() -> None:
        clock = deadlines.start()
        clock.pause()  # the upstream waits on the client
        due = clock.due
        await asyncio.sleep(0.2)  # several ticks past the deadline: a person thinking
        clock.resume()
        assert clock.due > due + 0.15
        resumed.set()
        await asyncio.sleep(0)
        outcome.append("ran on")
        deadlines.stop(clock)

    await asyncio.wait_for(call(), 5)
    assert outcome == ["ran on"] and resumed.is_set()


async def test_a_stopped_clock_is_forgotten_and_the_timer_stops() -> None:
    deadlines = Deadlines(0.05)
    clock = deadlines.start()
    deadlines.stop(clock)
    await asyncio.sleep(0.1)
    assert not clock.expired
    assert deadlines._timer is None
    deadlines.close()


async def test_a_clock_paused_past_its_waits_is_cancelled_and_knows_why() -> None:
    """The pause has a bound of its own (the route's ask_timeout): a client that never
    answers does not hold the call open for ever."""
    deadlines = Deadlines(60.0, waits=0.1)
    seen: list[str | None] = []

    async def call() -> None:
        clock = deadlines.start()
        clock.pause()  # the upstream waits on a client that never answers
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append(clock.expired)
            raise
        finally:
            deadlines.stop(clock)

    task = asyncio.ensure_future(call())
    done, _ = await asyncio.wait({task}, timeout=5)
    assert done and task.cancelled() and seen == ["ask_timeout"]
