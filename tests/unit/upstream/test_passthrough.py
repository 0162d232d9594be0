"""The pass-through lane's sender on a scripted carrier: what it answers itself, what
it holds for the full path (every message kept, in order), and what it tells the
upstream when the client leaves."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.core import Call, ClientContext, Exchange, Operation, ServerProfile, Value
from gateway.protocol.v2025_11_25 import Adapter2025_11_25
from gateway.protocol.v2026_07_28 import Adapter2026_07_28
from gateway.upstream.calls import Calls, Channel, InFlight, quiet
from gateway.upstream.carriers.base import CarrierError, UpstreamReply
from gateway.upstream.deadlines import Deadlines
from gateway.upstream.passthrough import HELD, Held, Sending, held_of
from gateway.upstream.retry import lane_watch, watched

ID = 7


class Scripted:
    """A carrier whose reply to the one request is ``messages`` (or ``fails``)."""

    cancels_by_close = True

    def __init__(
        self,
        messages: list[dict[str, Any]],
        *,
        fails: Exception | None = None,
        hang: bool = False,
        status: int = 200,
    ) -> None:
        self.messages, self.fails, self.hang, self.status = messages, fails, hang, status
        self.sent: list[tuple[dict[str, Any], dict[str, str]]] = []
        self.closed = False
        self.waiting = asyncio.Event()  # set once the reply hangs

    async def request(self, message: dict[str, Any], headers: dict[str, str]) -> UpstreamReply:
        self.sent.append((message, headers))
        if self.fails is not None:
            raise self.fails
        return UpstreamReply(self.status, {}, self._messages())

    async def _messages(self) -> AsyncIterator[dict[str, Any]]:
        try:
            if self.hang:
                self.waiting.set()
                await asyncio.Event().wait()
            for message in self.messages:
                yield message
        finally:
            self.closed = True


def _call(adapter: Any, token: int | None = None) -> Call:
    client = ClientContext(adapter.version, info={"name": "c", "version": "1"})
    params = {"name": "echo", "arguments": {"text": "hi"}}
    return Call(3, Operation.TOOLS_CALL, "tools/call", params, client, progress_token=token)


def _sending(adapter: Any, carrier: Scripted, deadline: float = 5.0) -> Sending:
    return Sending(adapter, carrier, ID, Deadlines(deadline), ServerProfile())


def _telling(adapter: Any, carrier: Scripted) -> tuple[Sending, list[tuple[int, str]]]:
    """A sender whose upstream is told a call is over, and what it was told."""
    told: list[tuple[int, str]] = []
    sending = _sending(adapter, carrier)
    sending.on_cancel = lambda headers, upstream_id, why: told.append((upstream_id, why))
    return sending, told


def _on(channel: Channel) -> tuple[str | None, InFlight | None]:
    return channel.session_id, channel.inflight


def _exchange(call: Call) -> Exchange:
    return Exchange(call, "/mcp", ServerProfile(), forward_headers={"authorization": "Bearer t"})


async def test_a_plain_result_is_the_answer_and_the_reply_is_closed() -> None:
    adapter = Adapter2026_07_28()
    result = {"content": [{"type": "text", "text": "hi"}]}
    carrier = Scripted([{"jsonrpc": "2.0", "id": ID, "result": result}])
    call = _call(adapter)
    sent = await _sending(adapter, carrier).send(call, _exchange(call), None, None)
    assert isinstance(sent, dict) and sent["content"] == result["content"]
    assert sent["resultType"] == "complete"
    assert carrier.closed
    message, headers = carrier.sent[0]
    assert message["id"] == ID and message["method"] == "tools/call"
    assert headers["authorization"] == "Bearer t" and headers["Mcp-Name"] == "echo"


async def test_a_translated_result_is_what_the_full_paths_reading_makes_of_it() -> None:
    """A 2025-11-25 client's call to a stateless upstream: the result comes back read
    by the upstream's adapter (a Value, as calls._read makes it), not as written; a
    question (input_required) is held for the full path."""
    upstream, client = Adapter2026_07_28(), Adapter2025_11_25()
    call = _call(client)
    result = {"resultType": "complete", "content": [{"type": "text", "text": "hi"}]}
    answer = {"jsonrpc": "2.0", "id": ID, "result": result}
    sending = _sending(upstream, Scripted([answer]))
    sending.translate = True
    sent = await sending.send(call, _exchange(call), None, None)
    assert sent == upstream.client_read_response(call, answer)
    assert isinstance(sent, Value)
    question = {"resultType": "input_required", "inputRequests": {}, "requestState": "s"}
    asking = _sending(upstream, Scripted([{"jsonrpc": "2.0", "id": ID, "result": question}]))
    asking.translate = True
    assert isinstance(await asking.send(call, _exchange(call), None, None), Held)


async def test_anything_else_is_held_with_every_message_in_order() -> None:
    adapter = Adapter2025_11_25()
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": ID}}
    error = {"jsonrpc": "2.0", "id": ID, "error": {"code": -32603, "message": "no"}}
    carrier = Scripted([note, error])
    call = _call(adapter, token="client-token")
    inflight = InFlight()
    channel = Channel(adapter, carrier, "up-session", inflight)
    sent = await _sending(adapter, carrier).send(call, _exchange(call), *_on(channel))
    assert isinstance(sent, Held) and sent.upstream_id == ID
    assert carrier.sent[0][0]["params"]["_meta"]["progressToken"] == ID  # as the full path
    assert ID in inflight.calls  # still in flight: the full path takes it over
    exchange = _exchange(call)
    exchange.extra[HELD] = sent
    listing = _call(adapter)  # another call on the same exchange (a listing) never takes it
    assert held_of(exchange, listing) is None
    assert held_of(exchange, call) is sent and held_of(exchange, call) is None  # once
    reply = sent.take()
    assert [m async for m in reply.messages] == [note, error]
    await sent.abandon()  # taken: the full path closes it, not this
    assert ID in inflight.calls


async def test_a_held_reply_nobody_takes_is_closed_and_stopped() -> None:
    adapter = Adapter2025_11_25()
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}
    carrier = Scripted([note])
    sending, told = _telling(adapter, carrier)
    call = _call(adapter)
    inflight = InFlight()
    channel = Channel(adapter, carrier, "up-session", inflight)
    sent = await sending.send(call, _exchange(call), *_on(channel))
    assert isinstance(sent, Held)
    await sent.abandon()
    assert carrier.closed and inflight.calls == {} and told == [(ID, "client went away")]
    await sent.abandon()  # once
    assert told == [(ID, "client went away")]


async def test_a_carrier_failure_is_held_for_the_full_path_to_word() -> None:
    adapter = Adapter2026_07_28()
    lost = CarrierError("the connection closed before an answer")
    call = _call(adapter)
    carrier = Scripted([], fails=lost)
    sent = await _sending(adapter, carrier).send(call, _exchange(call), None, None)
    assert isinstance(sent, Held)
    with pytest.raises(CarrierError) as raised:
        sent.take()
    assert raised.value is lost


async def test_no_first_message_in_time_is_the_routes_timeout() -> None:
    adapter = Adapter2026_07_28()
    carrier = Scripted([], hang=True)
    call = _call(adapter)
    sent = await _sending(adapter, carrier, deadline=0.05).send(call, _exchange(call), None, None)
    assert isinstance(sent, Held) and sent.error is not None and sent.error.timeout
    assert "timeout of 0.05 s" in str(sent.error)
    assert carrier.closed


async def test_a_client_that_leaves_is_cancelled_upstream_where_closing_does_not() -> None:
    adapter = Adapter2025_11_25()
    carrier = Scripted([], hang=True)
    sending, told = _telling(adapter, carrier)
    call = _call(adapter)
    inflight = InFlight()
    channel = Channel(adapter, carrier, "up-session", inflight)
    task = asyncio.ensure_future(sending.send(call, _exchange(call), *_on(channel)))
    await asyncio.wait_for(carrier.waiting.wait(), 5)
    assert ID in inflight.calls  # in flight meanwhile: a question off its stream is its
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert told == [(ID, "client went away")]
    assert inflight.calls == {} and carrier.closed


def test_what_the_full_path_runs_first_on_a_quiet_copy_never_sees_the_held_reply() -> None:
    """A listing the full path reads before the call (the tool's facts) runs on a quiet
    copy of the exchange: it has an ``extra`` of its own, so it cannot take the reply."""
    adapter = Adapter2026_07_28()
    call = _call(adapter)
    exchange = _exchange(call)
    exchange.extra[HELD] = Held(call, ID, {})
    assert HELD not in quiet(exchange).extra
    assert HELD in exchange.extra


def test_a_retry_sees_what_the_lane_asked() -> None:
    adapter = Adapter2025_11_25()
    call = _call(adapter)
    exchange = _exchange(call)

    async def ask(question: Any) -> Any:
        return None

    exchange.ask = ask
    watch = watched(call, exchange, tool_is_safe=True)
    assert watch is not None
    exchange.extra[HELD] = Held(call, ID, {}, watch=watch)
    assert lane_watch(exchange, call) is watch
    assert lane_watch(exchange, _call(adapter)) is None  # another call's: not this one's


async def _held_on(old: Scripted, call: Call) -> tuple[Exchange, InFlight]:
    """``call`` sent by the lane on session "old" (over ``old``), its reply held."""
    adapter, inflight = Adapter2025_11_25(), InFlight()
    sent = await _sending(adapter, old).send(call, _exchange(call), "old", inflight)
    assert isinstance(sent, Held)
    exchange = _exchange(call)
    exchange.extra[HELD] = sent
    return exchange, inflight


async def test_a_reply_held_on_a_session_since_replaced_is_read_where_it_was_sent() -> None:
    """Review finding 7: the client's upstream session was replaced while the lane
    waited.  The held reply (an error here) is read on the session it came from, and
    the new session is sent nothing."""
    error = {"jsonrpc": "2.0", "id": ID, "error": {"code": -32603, "message": "no"}}
    old, new = Scripted([error]), Scripted([])
    adapter = Adapter2025_11_25()
    call = _call(adapter)
    exchange, inflight = await _held_on(old, call)
    channel = Channel(adapter, new, "new", InFlight())
    outcome = await Calls(itertools.count(100)).handle(call, exchange, channel)
    assert getattr(outcome, "message", None) == "no"
    assert new.sent == [] and len(old.sent) == 1 and old.closed
    assert inflight.calls == {}


async def test_a_session_gone_reply_held_from_a_replaced_session_is_sent_on_the_new_one() -> None:
    """The replaced session's 404 says the call never ran: it is sent once on the
    session there is now (no second initialize, and the old one is told nothing)."""
    result = {"content": [{"type": "text", "text": "hi"}]}
    old = Scripted([], status=404)
    new = Scripted([{"jsonrpc": "2.0", "id": 100, "result": result}])
    adapter = Adapter2025_11_25()
    call = _call(adapter)
    exchange, inflight = await _held_on(old, call)
    channel = Channel(adapter, new, "new", InFlight())
    outcome = await Calls(itertools.count(100)).handle(call, exchange, channel)
    assert getattr(outcome, "result", None) == result
    assert len(old.sent) == 1 and len(new.sent) == 1
    assert new.sent[0][1]["Mcp-Session-Id"] == "new"
    assert inflight.calls == {}
