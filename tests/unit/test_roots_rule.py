"""The per-client roots rule (gateway/upstream/roots.py): which calls ask their client
for its roots first, what a pool holds, and how the route learns its server's use."""

from __future__ import annotations

import asyncio
import time

from gateway.core import (
    Answer,
    Ask,
    AskKind,
    Call,
    ClientContext,
    Exchange,
    Operation,
    ServerProfile,
)
from gateway.upstream.roots import (
    NO_ROOTS,
    ROOTS_QUIET,
    RootsRule,
    answering_roots,
    as_roots,
    roots_digest,
)

ROOTS = {"roots": [{"uri": "file:///a", "name": "a"}]}


async def _asked(question: Ask) -> Answer | None:
    return Answer(result={"action": "accept"})


def _exchange(op: Operation, caps: dict[str, object], ask: bool = True) -> Exchange:
    call = Call(id=1, operation=op, method=op.value, params={}, client=ClientContext("x", caps))
    return Exchange(call=call, route="/r", profile=ServerProfile(), ask=_asked if ask else None)


def test_only_a_stateless_roots_client_s_calls_that_may_ask_ask_first() -> None:
    rule = RootsRule(per_client=True)
    roots = {"roots": {}}
    first = _exchange(Operation.TOOLS_CALL, roots)
    assert rule.asks_first(first.call, first)
    listing = _exchange(Operation.TOOLS_LIST, roots)
    assert not rule.asks_first(listing.call, listing)
    undeclared = _exchange(Operation.TOOLS_CALL, {})
    assert not rule.asks_first(undeclared.call, undeclared)
    quiet = _exchange(Operation.TOOLS_CALL, roots, ask=False)
    assert not rule.asks_first(quiet.call, quiet)
    shared = RootsRule(per_client=False)
    call = _exchange(Operation.TOOLS_CALL, roots)
    assert not shared.asks_first(call.call, call) and not shared.applies(call)


def test_the_route_learns_whether_its_server_uses_roots() -> None:
    rule = RootsRule(per_client=True)
    rule.ran(time.monotonic(), asked=False)  # too young to tell
    assert rule.used is None
    rule.ran(time.monotonic() - ROOTS_QUIET, asked=False)
    assert rule.used is False
    rule.heard()
    assert rule.used is True
    rule.ran(time.monotonic() - ROOTS_QUIET, asked=False)  # once heard, for good
    assert rule.used is True


def test_equal_roots_equal_pools_and_refusals_hold_none() -> None:
    assert roots_digest(ROOTS) == roots_digest({"roots": [{"name": "a", "uri": "file:///a"}]})
    assert roots_digest(ROOTS) != roots_digest(NO_ROOTS)
    assert as_roots(Answer(result=ROOTS)) == ROOTS
    assert as_roots(Answer(error={"code": -1, "message": "no"})) == NO_ROOTS
    assert as_roots(None) == NO_ROOTS


def test_a_pool_answers_roots_itself_and_passes_other_questions_on() -> None:
    heard: list[bool] = []
    ask = answering_roots(ROOTS, _asked, lambda: heard.append(True))
    roots = asyncio.run(ask(Ask(AskKind.LIST_ROOTS, {})))
    other = asyncio.run(ask(Ask(AskKind.ELICIT, {"message": "?"})))
    assert roots == Answer(result=ROOTS) and heard == [True]
    assert other == Answer(result={"action": "accept"})
