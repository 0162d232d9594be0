"""The parking table: bounded, deadline-driven, and it never leaves an upstream call hanging.

Each parked call here has a fake upstream task: it puts one ask, waits for its
answer (what a handshake-era upstream's request would get) and then either
ends, or ignores a refusal and keeps running until it is cancelled.  Every
wait is bounded; the only "sleeping" is the table's own deadlines and grace.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import pytest

from gateway.bridge.forwarder import Forwarder
from gateway.bridge.rounds import ParkedCall, ParkingTable, Phase
from gateway.core import (
    Answer,
    Ask,
    AskKind,
    Call,
    ClientContext,
    Exchange,
    Operation,
    Outcome,
    ServerProfile,
    Value,
)

WITHIN = 5.0
ELICIT = Ask(AskKind.ELICIT, {"message": "name?", "requestedSchema": {"type": "object"}})
SAMPLE = Ask(AskKind.SAMPLE, {"messages": [], "maxTokens": 10})
ROOTS = Ask(AskKind.LIST_ROOTS, {})


@dataclass
class FakeUpstreamCall:
    """One upstream call that asked one question and waits for the answer."""

    parked: ParkedCall
    ask: Ask
    answer: asyncio.Future[Answer]
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    got: Answer | None = None

    @property
    def task(self) -> asyncio.Task[Outcome]:
        assert self.parked.task is not None
        return self.parked.task


def start_call(
    ask: Ask = ELICIT, *, ignore_refusal: bool = False, stats: Counter[str] | None = None
) -> FakeUpstreamCall:
    """A parked call whose upstream task waits on its ask (and maybe ignores a refusal);
    ``stats`` counts what the upstream saw ("refused", "cancelled"), for calls not kept."""
    parked = ParkedCall()
    future = parked.questions.ask(ask)[1]
    parked.move(Phase.GATHERING)
    parked.move(Phase.PARKED)  # as the runner hands its round out, before parking it
    call = FakeUpstreamCall(parked, ask, future)

    async def upstream() -> Outcome:
        try:
            call.got = await future
            call.answered.set()
            if stats is not None and call.got == Answer.refusal(ask.kind):
                stats["refused"] += 1
            if ignore_refusal:
                await asyncio.Event().wait()  # a stubborn upstream: never ends by itself
            return Value({"content": [], "answer": call.got.result})
        except asyncio.CancelledError:
            call.cancelled.set()
            if stats is not None:
                stats["cancelled"] += 1
            raise

    parked.task = asyncio.get_running_loop().create_task(upstream())
    return call


async def bounded(event: asyncio.Event, within: float = WITHIN) -> None:
    await asyncio.wait_for(event.wait(), within)


async def settle(table: ParkingTable) -> None:
    """Until every reaping the table started has finished (bounded)."""
    while table._reaping:
        await asyncio.wait_for(asyncio.gather(*table._reaping, return_exceptions=True), WITHIN)
        # Their done callbacks (which take them out of the set) run on the loop's next
        # turn; awaiting futures already done yields none on Python 3.12 (a busy loop).
        await asyncio.sleep(0)


# --------------------------------------------------------------------------- bound


async def test_a_principal_at_its_quota_loses_its_oldest_which_is_refused() -> None:
    table = ParkingTable(max_entries=10, ttl=60.0, grace=WITHIN, per_principal=2)
    a, b, c = start_call(), start_call(SAMPLE), start_call(ROOTS)
    for call in (a, b, c):
        table.park(call.parked)
    assert len(table) == 2
    assert table.get(a.parked.id) is None
    assert table.get(b.parked.id) is b.parked
    assert table.get(c.parked.id) is c.parked
    # The oldest's upstream gets the refusal for its kind of ask, and ends by itself.
    await bounded(a.answered)
    assert a.got == Answer.refusal(AskKind.ELICIT) == Answer(result={"action": "cancel"})
    assert (await asyncio.wait_for(a.task, WITHIN)) == Value(
        {"content": [], "answer": {"action": "cancel"}}
    )
    assert not a.cancelled.is_set()
    assert not a.parked.questions
    # The others still wait for their client.
    assert not b.answer.done() and not c.answer.done()
    await settle(table)
    await asyncio.wait_for(table.close(), WITHIN)
    assert b.got == Answer.refusal(AskKind.SAMPLE)
    assert b.got.error is not None
    assert c.got == Answer.refusal(AskKind.LIST_ROOTS)


async def test_parking_again_makes_a_call_the_newest() -> None:
    table = ParkingTable(max_entries=10, ttl=60.0, grace=WITHIN, per_principal=2)
    a, b, c = start_call(), start_call(), start_call()
    table.park(a.parked)
    table.park(b.parked)
    table.park(a.parked)  # a's retry came back with another round: a is now the newest
    table.park(c.parked)
    assert table.get(b.parked.id) is None
    assert table.get(a.parked.id) is a.parked
    await bounded(b.answered)
    assert b.got == Answer.refusal(AskKind.ELICIT)
    assert not a.answer.done()
    await asyncio.wait_for(table.close(), WITHIN)


async def test_unpark_stops_the_deadline() -> None:
    table = ParkingTable(max_entries=10, ttl=60.0)
    a = start_call()
    table.park(a.parked)
    handle = a.parked._expiry
    assert handle is not None and not handle.cancelled()
    table.unpark(a.parked)
    assert len(table) == 0
    assert handle.cancelled()
    assert a.parked._expiry is None
    a.task.cancel()
    await asyncio.gather(a.task, return_exceptions=True)


# --------------------------------------------------------------------------- deadline


async def test_a_parked_call_expires_at_its_deadline() -> None:
    loop = asyncio.get_running_loop()
    table = ParkingTable(max_entries=10, ttl=0.05, grace=WITHIN)
    a = start_call()
    parked_at = loop.time()
    table.park(a.parked)
    await bounded(a.answered)
    assert loop.time() - parked_at >= 0.04  # not before its deadline (timer slack allowed)
    assert a.got == Answer(result={"action": "cancel"})
    assert len(table) == 0
    assert table.get(a.parked.id) is None
    # It ended by itself on the refusal: nothing to cancel.
    await asyncio.wait_for(a.task, WITHIN)
    await settle(table)
    assert not a.cancelled.is_set()


async def test_reap_cancels_an_upstream_call_that_ignores_the_refusal() -> None:
    table = ParkingTable(max_entries=10, ttl=0.05, grace=0.05)
    a = start_call(ignore_refusal=True)
    table.park(a.parked)
    await bounded(a.answered)
    assert a.got == Answer.refusal(AskKind.ELICIT)
    await bounded(a.cancelled)  # cancelled after `grace`
    await settle(table)
    assert a.task.cancelled()
    assert not table._reaping


async def test_expire_of_an_unknown_or_already_expired_call_is_harmless() -> None:
    table = ParkingTable(max_entries=10, ttl=60.0, grace=0.05)
    a = start_call()
    table.park(a.parked)
    table.expire(a.parked.id)
    table.expire(a.parked.id)
    table.expire("no-such-call")
    await bounded(a.answered)
    await settle(table)
    assert len(table) == 0


async def test_a_parked_call_without_a_task_expires_cleanly() -> None:
    table = ParkingTable(max_entries=10, ttl=0.05, grace=0.05)
    parked = ParkedCall()
    future = parked.questions.ask(ELICIT)[1]
    table.park(parked)
    assert (await asyncio.wait_for(future, WITHIN)) == Answer.refusal(AskKind.ELICIT)
    await settle(table)
    assert len(table) == 0


async def test_release_refuses_and_ends_a_call_parked_or_not() -> None:
    """What the forwarder does when a client cannot be asked: the refusal reaches the
    upstream first, then a call that ignores it is cancelled after `grace`."""
    table = ParkingTable(max_entries=10, ttl=60.0, grace=0.05)
    parked_one, loose = start_call(ignore_refusal=True), start_call()
    table.park(parked_one.parked)
    table.release(parked_one.parked)
    table.release(loose.parked)  # never parked: released all the same
    assert len(table) == 0
    assert parked_one.parked._expiry is None
    await bounded(parked_one.answered)
    await bounded(loose.answered)
    assert parked_one.got == loose.got == Answer.refusal(AskKind.ELICIT)
    await bounded(parked_one.cancelled)
    await settle(table)
    assert parked_one.task.cancelled()
    assert not loose.task.cancelled() and loose.task.done()


# --------------------------------------------------------------------------- close


async def test_close_releases_everything() -> None:
    table = ParkingTable(max_entries=100, ttl=60.0, grace=0.05)
    calls = [start_call(ignore_refusal=bool(n % 2)) for n in range(10)]
    for call in calls:
        table.park(call.parked)
    await asyncio.wait_for(table.close(), WITHIN)
    assert len(table) == 0
    assert not table._reaping
    for n, call in enumerate(calls):
        assert call.got == Answer.refusal(AskKind.ELICIT)
        assert call.task.done()
        assert call.task.cancelled() == bool(n % 2)


# --------------------------------------------------------------------------- memory


def _record_deadlines(
    monkeypatch: pytest.MonkeyPatch, loop: asyncio.AbstractEventLoop, table: ParkingTable
) -> list[asyncio.TimerHandle]:
    """Every deadline timer ``table`` schedules on ``loop`` (through its public API)."""
    timers: list[asyncio.TimerHandle] = []
    schedule = loop.call_later

    def call_later(delay: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        handle = schedule(delay, callback, *args, **kwargs)
        if callback == table.expire:
            timers.append(handle)
        return handle

    monkeypatch.setattr(loop, "call_later", call_later)
    return timers


async def test_thousands_of_abandoned_calls_stay_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """5000 calls parked and never retried, 1000 allowed: entries, upstream tasks and
    deadline timers stay at the bound; every evicted call's upstream got a refusal and
    ended (or, ignoring it, was cancelled), and is garbage afterwards.  (What the
    parked calls weigh in bytes is measured by `python -m bench.memory`.)"""
    loop = asyncio.get_running_loop()
    bound, total = 1000, 5000
    # One principal (anonymous) at its quota: its own oldest calls make room.
    table = ParkingTable(
        max_entries=2 * bound, ttl=600.0, grace=0.01, per_principal=bound, short_ttl=600.0
    )
    stats: Counter[str] = Counter()
    timers = _record_deadlines(monkeypatch, loop, table)
    # Only the newest `bound` calls are held here: the table must not hold the rest.
    recent: deque[FakeUpstreamCall] = deque(maxlen=bound)
    every: list[weakref.ref[ParkedCall]] = []
    for n in range(total):
        call = start_call(ignore_refusal=n % 3 == 0, stats=stats)
        recent.append(call)
        every.append(weakref.ref(call.parked))
        table.park(call.parked)
        assert len(table) <= bound
    del call
    assert len(table) == bound
    await settle(table)
    evicted = total - bound
    assert stats["refused"] == evicted
    assert stats["cancelled"] == sum(1 for n in range(evicted) if n % 3 == 0)
    assert sum(1 for c in recent if not c.task.done()) == bound
    assert all(table.get(c.parked.id) is c.parked for c in recent)
    # One deadline per call parked; the evicted calls' went with them.
    assert len(timers) == total
    assert sum(1 for timer in timers if not timer.cancelled()) == bound
    gc.collect()
    assert sum(1 for ref in every if ref() is not None) == bound
    await asyncio.wait_for(table.close(), WITHIN * 4)
    assert all(c.task.done() for c in recent)
    assert stats["refused"] == total
    assert len(table) == 0


# --------------------------------------------------------------------------- the forwarder


class _AskingUpstream:
    """A handshake-era upstream whose call asks once `go` is set, then reports."""

    stateless = False

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.started = asyncio.Event()
        self.answered = asyncio.Event()
        self.got: Answer | None = None

    async def handle(self, call: Call, exchange: Exchange) -> Outcome:
        self.started.set()
        await self.go.wait()
        assert exchange.ask is not None
        self.got = await exchange.ask(ELICIT)
        self.answered.set()
        await asyncio.Event().wait()  # ignores a refusal: must be cancelled
        raise AssertionError("unreachable")


async def test_a_client_gone_while_its_call_asks_does_not_leave_the_ask_hanging() -> None:
    """The client's request is cancelled just as the upstream asks: no state was handed
    out, so the ask is refused and the call ended, not left waiting forever."""
    upstream = _AskingUpstream()
    table = ParkingTable(max_entries=10, ttl=600.0, grace=0.05)
    forwarder = Forwarder(upstream, parking=table)
    assert forwarder.parking is table  # the table given, though empty (and so falsy)
    call = Call(
        id=1,
        operation=Operation.TOOLS_CALL,
        method="tools/call",
        params={"name": "ask_name", "arguments": {}},
        client=ClientContext("2026-07-28", capabilities={"elicitation": {}}),
    )
    exchange = Exchange(call=call, route="/mcp", profile=ServerProfile(), can_park=True)
    request = asyncio.ensure_future(forwarder.handle(call, exchange))
    await bounded(upstream.started)
    upstream.go.set()  # the upstream asks ...
    request.cancel()  # ... as the client goes away, before the forwarder hands it out
    await asyncio.gather(request, return_exceptions=True)
    assert request.cancelled()
    await bounded(upstream.answered)
    assert upstream.got == Answer.refusal(AskKind.ELICIT)
    await settle(forwarder.parking)
    assert forwarder.parked_count == 0
    await asyncio.wait_for(forwarder.close(), WITHIN)
