"""Responder: one POST's answer as JSON, a whole SSE body, or a stream; and nothing
opened after the answer is out."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.transport.post import WholeAnswer
from gateway.transport.responder import EVENT_STREAM, JSON, AnswerSent, Responder
from gateway.transport.resume import EventLog
from gateway.wire.sse import SseParser

MESSAGE = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}


class Request:
    """The one thing a Responder asks of its request: a stream to open."""

    def __init__(self) -> None:
        self.opened: list[dict[str, str]] = []

    async def open_stream(self, headers: dict[str, str]) -> Any:
        self.opened.append(headers)
        raise AssertionError("no stream was to be opened")


async def test_a_call_that_may_ask_answered_at_once_is_one_whole_primed_body() -> None:
    request, log = Request(), EventLog()
    responder = Responder(request, {"Mcp-Session-Id": "s"}, log, priming=True)  # type: ignore[arg-type]
    responder.open_soon()
    answer = await responder.finish(MESSAGE)
    responder.disarm()
    assert isinstance(answer, WholeAnswer) and answer.status == 200
    assert answer.content_type == EVENT_STREAM
    assert answer.headers == {"Mcp-Session-Id": "s", "Cache-Control": "no-cache"}
    priming, message = SseParser().feed(answer.body)
    assert priming.data == "" and priming.retry is not None
    assert orjson.loads(message.data) == MESSAGE and message.id is not None
    replay = log.after(priming.id or "")
    assert replay is not None and replay[2]  # the stream is done
    assert [e.data for f in replay[1] for e in SseParser().feed(f)] == [message.data]
    assert request.opened == []


@pytest.mark.parametrize("streamed", [True, False])
async def test_nothing_is_sent_once_the_answer_is_out(streamed: bool) -> None:
    """A message for the request after its answer (a question its call's upstream
    asked as the call ended) opens no second response: AnswerSent."""
    request = Request()
    responder = Responder(request, {}, EventLog(), priming=True)  # type: ignore[arg-type]
    if streamed:
        responder.open_soon()
    answer = await responder.finish(MESSAGE)
    assert isinstance(answer, WholeAnswer)
    assert answer.content_type == (EVENT_STREAM if streamed else JSON)
    with pytest.raises(AnswerSent):
        await responder.send({"jsonrpc": "2.0", "id": 9, "method": "elicitation/create"})
    responder.disarm()
    assert request.opened == []
