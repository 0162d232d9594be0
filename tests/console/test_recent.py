"""The recent-calls ring (one class, no I/O): bounded per route, redacted, cut, and
its memory at the bound measured (the figure docs/console.md gives)."""

from __future__ import annotations

import time
import tracemalloc

from gateway.console.recent import RecentCalls, redact
from gateway.core import ClientContext, Operation, ServerProfile, Value
from gateway.core.call import Call
from gateway.core.redaction import REDACTED


def tool_call(number: int, text: str) -> Call:
    return Call(
        id=number,
        operation=Operation.TOOLS_CALL,
        method="tools/call",
        params={"name": "echo", "arguments": {"text": text, "password": "hunter2"}},
        client=ClientContext(protocol_version="x"),
    )


def fill(recent: RecentCalls, calls: int, text: str) -> None:
    tap = recent.tap("/mcp", None)
    profile = ServerProfile(versions=("upstream-revision",))
    for number in range(calls):
        answer = {"jsonrpc": "2.0", "id": number, "result": {"text": text}}
        tap(
            tool_call(number, text),
            "client-revision",
            "f" * 64,
            profile,
            Value({"text": text}),
            answer,
            time.perf_counter(),
        )


def test_each_route_keeps_only_its_last_calls() -> None:
    recent = RecentCalls(50, bodies=False, body_chars=100)
    fill(recent, 500, "hi")
    kept = recent.select()
    assert len(kept) == 50
    assert kept[0].number == 500 and kept[-1].number == 451
    assert all(c.client_sent is None and c.client_got is None for c in kept)
    assert kept[0].principal == "f" * 12


def test_bodies_are_redacted_and_cut() -> None:
    recent = RecentCalls(5, bodies=True, body_chars=200)
    fill(recent, 1, "short")
    fill(recent, 1, "x" * 1000)
    short, long = recent.select()[::-1]
    assert short.client_sent is not None and "hunter2" not in short.client_sent
    assert REDACTED in short.client_sent
    assert long.client_got is not None
    assert len(long.client_got) < 260 and "cut (" in long.client_got
    assert redact({"a": [{"Authorization": "Bearer t"}]}) == {"a": [{"Authorization": REDACTED}]}


def test_the_ring_at_its_bound_stays_small() -> None:
    """200 calls (the default bound) with bodies recorded at their cut (4 KiB each
    way): under 2 MiB for the route; without bodies, under 150 KiB."""
    for bodies, limit in ((True, 2_000_000), (False, 150_000)):
        recent = RecentCalls(200, bodies=bodies, body_chars=4096)
        fill(recent, 200, "warm")  # the ring's deque and counters exist before measuring
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        fill(recent, 1000, "y" * 10_000)
        used = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        print(f"bodies={bodies}: {used} bytes for 200 calls")
        assert used < limit
