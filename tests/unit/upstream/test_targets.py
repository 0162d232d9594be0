"""gateway/upstream/targets.py: which target a call goes to (fake links, a fake clock)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from gateway.core import (
    Call,
    ClientContext,
    Downstream,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    ServerProfile,
    Value,
)
from gateway.protocol.v2026_07_28 import Adapter2026_07_28
from gateway.upstream.carriers.base import UNREACHED
from gateway.upstream.settings import UpstreamSettings
from gateway.upstream.targets import Targets

STATELESS = Adapter2026_07_28()


@dataclass
class _Adapter:
    """A handshake-era upstream's adapter as the targets read it; a stateless one's is
    the real 2026-07-28 adapter (its created tasks are read by it)."""

    has_handshake: bool = True

    def client_read_created_task(self, result: dict[str, Any]) -> Any:
        return None


@dataclass
class _Verdict:
    adapter: _Adapter = field(default_factory=_Adapter)


class FakeLink:
    def __init__(self, name: str, outcome: Outcome | None = None) -> None:
        self.settings = UpstreamSettings(f"http://{name}:1/mcp", route="/mcp")
        self.verdict = _Verdict()
        self.outcome = outcome or Value({"content": [], "served_by": name})
        self.calls: list[str] = []
        self.opened: list[str] = []
        self.retrying = True
        self.retries: dict[str, int] = {}
        self.safe = False  # what its tools/list said of the tool

    def tool_is_safe(self, principal: str, call: Call) -> bool:
        return self.safe

    def note_retry(self, call: Call, why: str) -> None:
        self.retries[why] = self.retries.get(why, 0) + 1

    async def handle(self, call: Call, exchange: Exchange) -> Outcome:
        self.calls.append(call.method)
        return self.outcome

    async def ensure(self, principal: str, headers: Any) -> _Verdict:
        self.verdict = _Verdict()
        return self.verdict

    def forget(self) -> None:  # probed again at its next check (a fake keeps its era)
        return None

    async def ping(self) -> None:  # what a check asks: the era, then a ping
        if self.verdict is None:
            await self.ensure("anonymous", {})

    async def open(self, exchange: Exchange) -> Failure | None:
        assert exchange.downstream is not None
        self.opened.append(exchange.downstream.key)
        return None


def make(*links: FakeLink, now: list[float] | None = None) -> Targets:
    clock = now or [0.0]
    return Targets(list(links), clock=lambda: clock[0])  # type: ignore[arg-type]


def call(method: str = "tools/call", **params: Any) -> Call:
    op = Operation.for_method(method)
    client = ClientContext("2026-07-28", adapter=STATELESS)  # decoded by that revision
    return Call(1, op, method, {"name": "echo", **params}, client)


def exchange(session: str | None = None) -> Exchange:
    async def _ignore(_: Any) -> None:
        return None

    downstream = Downstream(session, None, _ignore) if session is not None else None
    return Exchange(call(), "/mcp", ServerProfile(), downstream=downstream)


async def test_a_call_that_never_left_goes_to_the_next_target() -> None:
    refused = Failure(FailureKind.UPSTREAM_UNAVAILABLE, "refused", UNREACHED)
    a, b = FakeLink("a", refused), FakeLink("b")
    targets = make(a, b)
    outcomes = [await targets.handle(call(), exchange()) for _ in range(4)]
    assert all(isinstance(o, Value) for o in outcomes)
    assert len(b.calls) == 4 and targets.retries["never_sent"] >= 1
    assert not a.retrying and not b.retrying  # the targets send again, not each link
    assert [row["state"] for row in targets.states()] == ["ejected", "up"]


async def test_a_call_that_may_have_reached_its_target_is_not_sent_again() -> None:
    reset = Failure(FailureKind.UPSTREAM_UNAVAILABLE, "reset mid-answer")
    a, b = FakeLink("a", reset), FakeLink("b", reset)
    targets = make(a, b)
    outcome = await targets.handle(call(), exchange())
    assert outcome is reset and len(a.calls) + len(b.calls) == 1


async def test_a_safe_tool_or_a_read_goes_to_another_target_once() -> None:
    reset = Failure(FailureKind.UPSTREAM_UNAVAILABLE, "reset mid-answer")
    a, b, c = FakeLink("a", reset), FakeLink("b", reset), FakeLink("c", reset)
    for link in (a, b, c):
        link.safe = True
    targets = make(a, b, c)
    assert await targets.handle(call(), exchange()) is reset
    assert len(a.calls) + len(b.calls) + len(c.calls) == 2  # once more, not more
    assert await targets.handle(call("resources/read", uri="file:///x"), exchange()) is reset
    assert targets.retries == {"safe_tool": 1, "read_only_method": 1}


async def test_a_session_is_pinned_to_the_target_it_opened_on() -> None:
    a, b = FakeLink("a"), FakeLink("b")
    targets = make(a, b)
    assert await targets.open(exchange("s1")) is None
    where = a if a.opened else b
    for _ in range(5):
        await targets.handle(call(), exchange("s1"))
    assert len(where.calls) == 5


async def test_an_upstream_task_is_asked_where_it_was_made() -> None:
    made = Value({"resultType": "task", "taskId": "t-1", "status": "working"})
    a, b = FakeLink("a", made), FakeLink("b", made)
    for link in (a, b):
        link.verdict = _Verdict(STATELESS)  # type: ignore[arg-type]
    targets = make(a, b)
    await targets.handle(call(), exchange())
    maker = a if a.calls else b
    for _ in range(4):
        await targets.handle(call("tasks/get", taskId="t-1"), exchange())
    assert maker.calls.count("tasks/get") == 4


async def test_every_target_out_is_said_at_once_with_when_to_try_again() -> None:
    down = Failure(FailureKind.UPSTREAM_TIMEOUT, "slow")
    now = [10.0]
    targets = make(FakeLink("a", down), FakeLink("b", down), now=now)
    for _ in range(6):
        await targets.handle(call(), exchange())
    outcome = await targets.handle(call(), exchange())
    assert isinstance(outcome, Failure) and outcome.kind is FailureKind.UPSTREAM_DOWN
    assert outcome.headers["Retry-After"] == "2"
    now[0] = 12.5  # past the back-off: each is on trial
    assert isinstance(await targets.handle(call(), exchange()), Failure)


def test_one_target_is_not_a_target_set() -> None:
    with pytest.raises(ValueError):
        make(FakeLink("a"))


async def test_a_passing_check_readmits_but_never_forgives_an_in_targets_failures() -> None:
    """bench.faults found it: a TCP check that passes said nothing of the time-outs a
    slow target's calls were having, and reset their count, so it was never ejected."""
    slow = Failure(FailureKind.UPSTREAM_TIMEOUT, "slow")
    now = [0.0]
    a, b = FakeLink("a", slow), FakeLink("b")
    targets = make(a, b, now=now)

    async def passes(link: Any) -> str | None:
        return None

    targets._problem = passes  # type: ignore[method-assign]
    targets.health[0].failed(0.0, "slow")
    targets.health[0].failed(0.0, "slow")
    await targets.check(0)
    assert targets.health[0].failures == 2
    targets.health[0].failed(0.0, "slow")
    assert targets.states()[0]["state"] == "ejected"
    now[0] = 5.0  # its back-off has passed: the check takes it back
    await targets.check(0)
    assert targets.states()[0]["state"] == "up"


async def test_one_callers_flood_of_tasks_never_forgets_anothers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gateway.upstream import targets as module

    monkeypatch.setattr(module, "MAX_TASKS", 20)
    monkeypatch.setattr(module, "MAX_TASKS_PER_PRINCIPAL", 5)

    made = [0]

    class Maker(FakeLink):
        async def handle(self, call: Call, exchange: Exchange) -> Outcome:
            made[0] += 1
            return Value({"resultType": "task", "taskId": f"t-{exchange.principal}-{made[0]}"})

    a, b = Maker("a"), Maker("b")
    for link in (a, b):
        link.verdict = _Verdict(STATELESS)  # type: ignore[arg-type]
    targets = make(a, b)

    def by(principal: str) -> Exchange:
        ex = exchange()
        ex.principal = principal
        return ex

    await targets.handle(call(), by("alice"))
    alice_task = "t-alice-1"
    where = targets._task_targets[alice_task]
    for _ in range(30):  # past the table's size: a shared LRU would forget alice's
        await targets.handle(call(), by("mallory"))
    assert targets._task_targets[alice_task] == where
    assert targets._tasks.held("mallory") == module.MAX_TASKS_PER_PRINCIPAL


async def test_checks_asked_together_or_soon_after_are_one_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """/readyz scraped by several scrapers, or often: one round of checks at a time,
    and a round under a second old stands for a new one."""
    now = [0.0]
    targets = make(FakeLink("a"), FakeLink("b"), now=now)
    asked: list[str] = []
    gate = asyncio.Event()

    async def problem(link: FakeLink) -> None:
        asked.append(link.settings.url)
        await gate.wait()

    monkeypatch.setattr(targets, "_problem", problem)
    together = [asyncio.ensure_future(targets.check_all()) for _ in range(3)]
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(*together)
    assert len(asked) == 2  # each target once
    now[0] = 0.9
    await targets.check_all()
    assert len(asked) == 2  # fresh
    now[0] = 1.1
    await targets.check_all()
    assert len(asked) == 4


async def test_a_target_of_another_era_stays_out_until_a_check_finds_the_routes_era() -> None:
    """Issue 46: ejected by a check, then re-admitted by the first call after its
    back-off (6 of 32 calls reached it). Now no call goes to it, and only a check that
    probes it again and finds the route's era takes it back."""
    now = [0.0]
    a, b = FakeLink("a"), FakeLink("b")
    b.verdict = _Verdict(_Adapter(has_handshake=False))
    speaks = [_Adapter(has_handshake=False)]  # what a probe of b finds

    def forget() -> None:
        b.verdict = None  # type: ignore[assignment]

    async def ensure(principal: str, headers: Any) -> _Verdict:
        b.verdict = _Verdict(speaks[0])
        return b.verdict

    b.forget, b.ensure = forget, ensure  # type: ignore[attr-defined, method-assign]
    targets = make(a, b, now=now)
    await targets.check(1)
    assert targets.states()[1]["state"] == "ejected"
    for moment in (10.0, 100.0, 1000.0):  # its back-off long past: still no call
        now[0] = moment
        for _ in range(8):
            assert isinstance(await targets.handle(call(), exchange()), Value)
        assert b.calls == [] and targets.states()[1]["state"] == "ejected"
    await targets.check(1)  # probed again: still the other era, out for longer
    assert targets.states()[1]["state"] == "ejected"
    speaks[0] = _Adapter(has_handshake=True)  # the operator fixed it
    now[0] = 5000.0
    await targets.check(1)
    assert targets.states()[1]["state"] == "up"


async def test_a_target_out_for_time_outs_comes_back_only_by_a_call_one_trial_at_a_time() -> None:
    """Issue 47: a hanging target's check (a ping) passes while its tools hang; a
    passing check re-admitted it and reset its back-off. Now only a call that succeeds
    takes it back, one trial call at a time, each failed trial doubling its time out."""
    slow = Failure(FailureKind.UPSTREAM_TIMEOUT, "no answer within 2 s")
    now = [0.0]
    a, b = FakeLink("a", slow), FakeLink("b")
    targets = make(a, b, now=now)
    for _ in range(3):
        targets._judge(0, slow)
    assert targets.states()[0]["state"] == "ejected"
    now[0] = 3.0  # its back-off (2 s) passed: a check that passes does not take it back
    await targets.check(0)
    assert targets.states()[0]["state"] != "up"
    assert targets._pick(skip={1}) == 0  # one trial call...
    targets.outstanding[0] += 1
    assert targets._pick(skip={1}) is None  # ...at a time
    targets.outstanding[0] -= 1
    targets._judge(0, slow)  # the trial timed out: out for twice as long
    assert targets.health[0].until == 7.0
    now[0] = 8.0
    await targets.check(0)
    assert targets.states()[0]["state"] != "up"
    assert targets._pick(skip={1}) == 0
    # A listing answers while its tools hang: it takes nothing back.
    targets._judge(0, Value({"tools": []}), Operation.TOOLS_LIST)
    assert targets.states()[0]["state"] != "up"
    targets._judge(0, Value({}), Operation.TOOLS_CALL)  # a call that succeeds takes it back
    assert targets.states()[0]["state"] == "up"


async def test_a_target_that_answers_its_check_with_a_json_rpc_error_stays_up() -> None:
    """A server with no ping (or that refuses it) answers MCP all the same."""
    a, b = FakeLink("a"), FakeLink("b")

    async def refuses() -> None:
        raise Failure(FailureKind.UPSTREAM_ERROR, "Method not found: ping", code=-32601)

    b.ping = refuses  # type: ignore[method-assign]
    targets = make(a, b)
    await targets.check(1)
    assert targets.states()[1]["state"] == "up"


async def test_the_routes_era_is_the_one_most_of_its_targets_speak() -> None:
    """The first target back speaking another era than the other two is the odd one;
    the two that agree are never taken out for it."""
    a, b, c = FakeLink("a"), FakeLink("b"), FakeLink("c")
    for stateless in (b, c):
        stateless.verdict = _Verdict(_Adapter(has_handshake=False))
    targets = make(a, b, c)
    for index in range(3):
        await targets.check(index)
    assert [row["state"] for row in targets.states()] == ["ejected", "up", "up"]


async def test_a_session_on_a_target_being_tried_again_waits_its_turn() -> None:
    """A session pinned to a target on trial: one call at a time there too; another
    meanwhile is not sent (it may be sent again in a second)."""
    slow = Failure(FailureKind.UPSTREAM_TIMEOUT, "no answer within 2 s")
    now = [0.0]
    a, b = FakeLink("a"), FakeLink("b")
    targets = make(a, b, now=now)
    assert await targets.open(exchange("s1")) is None
    held = targets._pins["s1"]
    for _ in range(3):
        targets._judge(held, slow)
    now[0] = 3.0  # its back-off passed: on trial
    assert targets._pick(skip={1 - held}) == held
    targets.outstanding[held] += 1  # the trial call in flight
    refused = await targets.handle(call(), exchange("s1"))
    assert isinstance(refused, Failure) and refused.kind is FailureKind.UPSTREAM_UNAVAILABLE
    assert refused.headers.get("Retry-After") == "1"
    assert (a.calls, b.calls) == ([], [])  # sent nowhere
