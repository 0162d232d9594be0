"""A parked call begun by the pass-through lane (ParkedCalls.handle with ``lane``):
its plain result is the call's; a reply it holds is the full path's to read on from,
in the same task; and a held reply the full path never took is let go when the call
ends, never left in flight.  ``held_of`` never hands out a reply twice."""

from __future__ import annotations

import asyncio

from gateway.bridge.parked_calls import ParkedCalls
from gateway.bridge.rounds import ParkingTable
from gateway.bridge.state import StateSealer
from gateway.core import Call, ClientContext, Exchange, Operation, Outcome, ServerProfile, Value
from gateway.upstream.passthrough import HELD, Held, held_of

WITHIN = 5.0
CLIENT = ClientContext("2026-07-28", capabilities={"elicitation": {}})


def _call() -> Call:
    return Call(1, Operation.TOOLS_CALL, "tools/call", {"name": "echo"}, CLIENT)


class Flights:
    """A session's calls in flight (upstream/calls.py's InFlight, as Held sees it)."""

    def __init__(self) -> None:
        self.calls: dict[int, tuple[Exchange, str | int | None]] = {}


class Upstream:
    """The full path's upstream: takes the held reply (or waits forever, ``stuck``)."""

    def __init__(self, stuck: bool = False) -> None:
        self.stuck = stuck
        self.took: list[Held | None] = []
        self.started = asyncio.Event()

    async def handle(self, call: Call, exchange: Exchange) -> Outcome:
        self.started.set()
        if self.stuck:
            await asyncio.Event().wait()
        self.took.append(held_of(exchange, call))
        return Value({"content": [], "from": "full path"})


def _parked(upstream: Upstream) -> ParkedCalls:
    return ParkedCalls(upstream, ParkingTable(), StateSealer(), 0.01)


async def test_the_lanes_plain_result_is_the_calls_and_the_full_path_is_not_run() -> None:
    upstream, call = Upstream(), _call()

    async def lane(inner: Exchange) -> object:
        return Value({"content": [], "from": "lane"})

    exchange = Exchange(call, "/mcp", ServerProfile(), can_park=True)
    outcome = await asyncio.wait_for(_parked(upstream).handle(call, exchange, lane), WITHIN)
    assert outcome == Value({"content": [], "from": "lane"})
    assert upstream.took == []


async def test_a_held_reply_is_read_on_by_the_full_path_in_the_same_task() -> None:
    upstream, call = Upstream(), _call()
    held = Held(call, 7, {})

    async def lane(inner: Exchange) -> object:
        return held

    exchange = Exchange(call, "/mcp", ServerProfile(), can_park=True)
    outcome = await asyncio.wait_for(_parked(upstream).handle(call, exchange, lane), WITHIN)
    assert outcome == Value({"content": [], "from": "full path"})
    assert upstream.took == [held] and held.taken
    assert HELD not in exchange.extra


async def test_a_held_reply_never_taken_is_let_go_when_the_call_ends() -> None:
    """The client goes away before the full path took the reply: released."""
    upstream, call = Upstream(stuck=True), _call()
    flights = Flights()
    held = Held(call, 7, {}, inflight=flights)  # in flight on its session until let go
    flights.calls[7] = (Exchange(call, "/mcp", ServerProfile()), None)

    async def lane(inner: Exchange) -> object:
        return held

    exchange = Exchange(call, "/mcp", ServerProfile(), can_park=True)
    parked = _parked(upstream)
    request = asyncio.ensure_future(parked.handle(call, exchange, lane))
    await asyncio.wait_for(upstream.started.wait(), WITHIN)
    request.cancel()
    await asyncio.gather(request, return_exceptions=True)
    await asyncio.wait_for(parked.parking.close(), WITHIN)
    for _ in range(100):  # the cancelled task's finally runs on the loop's next turns
        if not flights.calls:
            break
        await asyncio.sleep(0)
    assert flights.calls == {} and held.taken


def test_held_of_never_hands_out_a_reply_twice() -> None:
    call = _call()
    held = Held(call, 3, {})
    exchange = Exchange(call, "/mcp", ServerProfile())
    exchange.extra[HELD] = held
    held.taken = True  # abandoned (or read) already
    assert held_of(exchange, call) is None
    held.taken = False
    exchange.extra[HELD] = held
    assert held_of(exchange, call) is held
    assert held_of(exchange, call) is None  # taken: gone from the exchange
