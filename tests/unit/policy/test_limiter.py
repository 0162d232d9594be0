"""The rate limiter of one route: which calls it counts, its refusals, and its fallback
when the shared store fails (a store that raises or hangs stands in for Redis here;
tests/cluster/test_rate_limits.py stops a real one under three replicas)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from structlog.testing import capture_logs

from gateway.core import Call, ClientContext, Failure, FailureKind, Operation
from gateway.policy import Limit, LocalBuckets, Rate, RateLimiter, Taken
from gateway.policy import limiter as limiter_module


def call(op: Operation = Operation.TOOLS_CALL, name: str = "search") -> Call:
    params: dict[str, Any] = {"name": name} if op is Operation.TOOLS_CALL else {}
    return Call(1, op, op.value, params, ClientContext(protocol_version="2025-06-18"))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Store:
    """A shared store that answers from buckets of its own, or fails as told."""

    def __init__(self) -> None:
        self.buckets = LocalBuckets()
        self.down = False
        self.hang = False
        self.asked = 0

    async def take_tokens(self, limits: Sequence[Limit]) -> Taken:
        self.asked += 1
        if self.hang:
            await asyncio.Event().wait()
        if self.down:
            raise ConnectionError("Connection refused")
        return self.buckets.take(limits)


async def test_a_caller_over_its_rate_gets_a_retry_after() -> None:
    limiter = RateLimiter("/mcp", Rate.parse("2/s", 2), None)
    assert await limiter.take("alice", call()) is None
    assert await limiter.take("alice", call()) is None
    refused = await limiter.take("alice", call())
    assert refused is not None
    failure, reason = refused
    assert reason == "rate"
    assert failure.kind is FailureKind.RATE_LIMITED
    assert failure.data == {"retryAfterSeconds": 1}
    assert failure.headers == {"Retry-After": "1"}
    assert "2/s (burst 2)" in failure.message
    assert await limiter.take("bob", call()) is None  # another caller is unaffected


async def test_a_slow_rate_says_how_long_to_wait() -> None:
    limiter = RateLimiter("/mcp", Rate.parse("6/m", 1), None)
    assert await limiter.take("alice", call()) is None
    refused = await limiter.take("alice", call())
    assert refused is not None
    assert refused[0].data == {"retryAfterSeconds": 10}
    assert refused[0].headers["Retry-After"] == "10"


async def test_per_tool_limits_count_each_tool_apart() -> None:
    limiter = RateLimiter("/mcp", Rate.parse("100/s"), Rate.parse("1/s", 1))
    assert await limiter.take("alice", call(name="search")) is None
    refused = await limiter.take("alice", call(name="search"))
    assert refused is not None and refused[1] == "tool_rate"
    assert "'search'" in refused[0].message
    assert await limiter.take("alice", call(name="read")) is None
    assert await limiter.take("bob", call(name="search")) is None


@pytest.mark.parametrize(
    ("op", "limited"),
    [
        (Operation.TOOLS_CALL, True),
        (Operation.PROMPTS_GET, True),
        (Operation.RESOURCES_READ, True),
        (Operation.COMPLETE, True),
        (Operation.TOOLS_LIST, False),
        (Operation.INITIALIZE, False),
        (Operation.PING, False),
        (Operation.LISTEN, False),
        (Operation.TASKS_GET, False),
    ],
)
async def test_which_calls_are_counted(op: Operation, limited: bool) -> None:
    limiter = RateLimiter("/mcp", Rate.parse("1/h", 1), Rate.parse("1/h", 1))
    outcomes = [await limiter.take("alice", call(op)) for _ in range(3)]
    assert (outcomes[-1] is not None) == limited


async def test_keys_are_digests_of_the_route_the_caller_and_the_tool() -> None:
    a = RateLimiter("/a", Rate.parse("1/s"), Rate.parse("1/s"))
    b = RateLimiter("/b", Rate.parse("1/s"), Rate.parse("1/s"))
    (principal, _), (tool, _) = a.limits("alice", call(name="x" * 100_000))
    assert len(tool[0]) < 64 and "x" not in tool[0] and "alice" not in principal[0]
    assert principal[0] != b.limits("alice", call())[0][0][0]


async def test_the_shared_store_is_used_while_it_answers() -> None:
    store = Store()
    limiter = RateLimiter("/mcp", Rate.parse("1/s", 1), None, shared=store)
    assert await limiter.take("alice", call()) is None
    assert await limiter.take("alice", call()) is not None
    assert store.asked == 2
    assert len(limiter.local) == 0


async def test_fail_open_limits_locally_and_says_so_once_each_way() -> None:
    store, clock = Store(), Clock()
    limiter = RateLimiter("/mcp", Rate.parse("1/s", 1), None, shared=store, clock=clock)
    store.down = True
    with capture_logs() as logs:
        assert await limiter.take("alice", call()) is None  # from the local bucket
        refused = await limiter.take("alice", call())  # the local bucket is empty
        assert refused is not None and refused[1] == "rate"
        assert store.asked == 1  # left alone until RECHECK
        clock.now += limiter_module.RECHECK
        await limiter.take("bob", call())
        assert store.asked == 2
        store.down = False
        clock.now += limiter_module.RECHECK
        assert await limiter.take("carol", call()) is None
        assert store.asked == 3
    events = [(e["log_level"], e["event"]) for e in logs]
    assert events == [
        ("warning", "rate limit store unreachable: each replica limits on its own (fail open)"),
        ("info", "rate limit store reachable again: limits shared"),
    ]
    assert logs[0]["route"] == "/mcp" and "refused" in logs[0]["error"]


async def test_fail_closed_refuses_every_limited_call_while_the_store_is_down() -> None:
    store, clock = Store(), Clock()
    limiter = RateLimiter(
        "/mcp", Rate.parse("100/s"), None, fallback="closed", shared=store, clock=clock
    )
    store.down = True
    with capture_logs() as logs:
        refused = await limiter.take("alice", call())
    assert refused is not None
    failure, reason = refused
    assert reason == "store_down"
    assert isinstance(failure, Failure) and failure.kind is FailureKind.OVERLOADED
    assert failure.headers == {"Retry-After": "1"} and failure.data == {"retryAfterSeconds": 1}
    assert "fail closed" in logs[0]["event"]
    assert await limiter.take("alice", call(Operation.TOOLS_LIST)) is None  # not limited


async def test_a_store_that_hangs_counts_as_down(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limiter_module, "STORE_TIMEOUT", 0.01)
    store = Store()
    store.hang = True
    limiter = RateLimiter("/mcp", Rate.parse("1/s", 1), None, shared=store)
    async with asyncio.timeout(5):
        assert await limiter.take("alice", call()) is None
        assert await limiter.take("alice", call()) is not None
