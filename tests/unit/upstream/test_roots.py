"""The per-client roots rule (gateway/upstream/roots.py): which calls ask their client
for its roots first, what a pool holds, and how the route learns its server's use."""

from __future__ import annotations

import asyncio

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
    RootsRule,
    RootsUse,
    answering_roots,
    as_roots,
    roots_digest,
    taking_roots,
)

ROOTS = {"roots": [{"uri": "file:///a", "name": "a"}]}


async def _asked(question: Ask) -> Answer | None:
    return Answer(result={"action": "accept"})


def _exchange(op: Operation, caps: dict[str, object], ask: bool = True) -> Exchange:
    call = Call(id=1, operation=op, method=op.value, params={}, client=ClientContext("x", caps))
    return Exchange(call=call, route="/r", profile=ServerProfile(), ask=_asked if ask else None)


def test_no_call_asks_first_until_the_server_is_seen_asking_outside_calls() -> None:
    rule = RootsRule("per-client")
    roots = {"roots": {}}
    first = _exchange(Operation.TOOLS_CALL, roots)
    assert rule.applies(first) and not rule.asks_first(first.call, first)
    rule.heard(in_call=True)  # asks inside calls (per tool): still never first
    assert rule.use is RootsUse.IN_CALLS and not rule.asks_first(first.call, first)
    rule.heard(in_call=False)  # asks outside calls: keeps them per session
    assert rule.mode == "per-session" and rule.asks_first(first.call, first)
    rule.heard(in_call=True)  # for good
    assert rule.use is RootsUse.PER_SESSION
    listing = _exchange(Operation.TOOLS_LIST, roots)
    assert not rule.asks_first(listing.call, listing) and rule.per_session(listing)
    undeclared = _exchange(Operation.TOOLS_CALL, {})
    assert not rule.asks_first(undeclared.call, undeclared)
    quiet = _exchange(Operation.TOOLS_CALL, roots, ask=False)
    assert not rule.asks_first(quiet.call, quiet)


def test_the_option_says_per_session_or_shared() -> None:
    roots = _exchange(Operation.TOOLS_CALL, {"roots": {}})
    told = RootsRule("per-session")
    assert told.mode == "per-session" and told.asks_first(roots.call, roots)
    shared = RootsRule("shared")
    shared.heard(in_call=False)
    assert shared.mode == "shared" and not shared.applies(roots)
    assert not shared.asks_first(roots.call, roots)


def test_a_roots_question_is_put_to_the_caller_and_its_answer_kept() -> None:
    steps: list[object] = []

    async def client(question: Ask) -> Answer | None:
        steps.append("asked")
        return Answer(result=ROOTS) if question.kind is AskKind.LIST_ROOTS else None

    ask = taking_roots(client, lambda: steps.append("asking"), steps.append)
    assert asyncio.run(ask(Ask(AskKind.LIST_ROOTS, {}))) == Answer(result=ROOTS)
    assert steps == ["asking", "asked", ROOTS]
    asyncio.run(ask(Ask(AskKind.ELICIT, {"message": "?"})))
    assert steps == ["asking", "asked", ROOTS, "asked"]  # other questions pass on


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
