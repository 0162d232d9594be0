"""push_asker: what a session client is asked, and what is refused before it is."""

from __future__ import annotations

from typing import Any

from gateway.core import Ask, AskKind, SessionView
from gateway.protocol.selection import AdapterSet
from gateway.transport.common import push_asker
from gateway.transport.responder import AnswerSent
from gateway.transport.sessions import Session

MULTI = {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}


async def test_an_ask_the_clients_revision_cannot_express_is_refused_unsent() -> None:
    adapter = AdapterSet.default().by_version["2025-06-18"]
    view = SessionView("s", "2025-06-18", capabilities={"elicitation": {}})
    session = Session(view, "anonymous")
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asker = push_asker(adapter, session, send, timeout=5)
    assert asker is not None
    schema = {"type": "object", "properties": {"pick": MULTI}, "required": ["pick"]}
    answer = await asker(Ask(AskKind.ELICIT, {"message": "m", "requestedSchema": schema}))
    assert answer is not None and answer.error is not None
    assert "pick" in answer.error["message"]
    assert sent == [] and len(session.questions) == 0


async def test_a_question_for_a_request_already_answered_reached_nobody() -> None:
    """Its call was answered first (the responder says AnswerSent): None, so the
    question goes where an off-call one goes, and nothing waits for its answer."""
    adapter = AdapterSet.default().by_version["2025-11-25"]
    view = SessionView("s", "2025-11-25", capabilities={"elicitation": {}})
    session = Session(view, "anonymous")

    async def send(message: dict[str, Any]) -> None:
        raise AnswerSent("the request's answer has gone out")

    asker = push_asker(adapter, session, send, timeout=5)
    assert asker is not None
    schema = {"type": "object", "properties": {}}
    assert await asker(Ask(AskKind.ELICIT, {"message": "m", "requestedSchema": schema})) is None
    assert len(session.questions) == 0
