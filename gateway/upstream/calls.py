"""Running one call on an upstream carrier, in the upstream's revision.

A call is one request upstream: its progress token rewritten so concurrent
clients never collide, the upstream's requests in between answered (ping
here, asks through the client), its events handed on, and, when the caller
gives up first, the upstream told to stop.

Each call is held to the route's ``timeout``: a deadline for each call's whole
time upstream (:mod:`.deadlines`).  A call's clock pauses while the upstream
waits on the client (a question it asked is being answered): a person taking
their time is no upstream's fault.  The time paused has its own bound (the
route's ``ask_timeout``, in all for the call): a client that never answers, or
an upstream asking without end, must not hold a call open for ever.  A stream
the upstream keeps alive with notifications or comments does not extend either.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterator,
    Mapping,
)
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from gateway.core import (
    Answer,
    Asker,
    AskKind,
    Call,
    ClientContext,
    Event,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    Value,
    discard_event,
    tracing,
)
from gateway.core import jsonrpc as rpc
from gateway.protocol import SUBSCRIPTION_ID, Adapter
from gateway.upstream.carriers.base import (
    Carrier,
    CarrierError,
    UpstreamReply,
    final,
    is_response_to,
)
from gateway.upstream.deadlines import Clock, Deadlines, uncancel
from gateway.upstream.passthrough import Held, held_of

log = structlog.get_logger(__name__)

# How many pages a listing the gateway makes on its own may take.
MAX_PAGES = 100


@dataclass
class InFlight:
    """The calls in flight on one upstream session, by upstream request id: who a
    message that arrives outside any call's own stream may belong to."""

    calls: dict[int, tuple[Exchange, str | int | None]] = field(default_factory=dict)
    # Calls blocked on an ask of their own: their handler cannot be asking anything else.
    waiting: set[int] = field(default_factory=set)

    def owner(self, question: bool = False) -> tuple[int, Exchange] | None:
        """A message off any call's stream belongs to a call only if just one could have
        sent it: one call in flight that is not itself blocked on an ask (for a
        ``question``, a call whose client cannot be asked, a listing, is none)."""
        running = [
            (upstream_id, exchange)
            for upstream_id, (exchange, _) in self.calls.items()
            if upstream_id not in self.waiting
        ]
        if question and len(running) > 1:
            running = [(key, exchange) for key, exchange in running if exchange.ask is not None]
        return running[0] if len(running) == 1 else None

    def any_asking(self) -> tuple[int, Exchange] | None:
        """The first call in flight whose client can be asked (blocked or not)."""
        for upstream_id, (exchange, _) in self.calls.items():
            if exchange.ask is not None:
                return upstream_id, exchange
        return None


@dataclass
class Channel:
    """Where a call goes: the upstream's revision, its carrier, and the upstream
    session it runs in (none for a stateless upstream)."""

    adapter: Adapter
    carrier: Carrier
    session_id: str | None = None
    inflight: InFlight | None = None


# Requests one call's upstream may have open at once, and send in all.
QUESTIONS_AT_ONCE = 32
QUESTIONS_PER_CALL = 256
# Answers to upstream requests one route sends at once: a flood of questions gets
# its answers over a few pooled connections, not one each.
ANSWERS_AT_ONCE = 16


@dataclass(frozen=True)
class QuestionBounds:
    """How many requests (questions, pings) one call's upstream may have open at once
    (``per_round``) and send in all (``per_call``); past either, each is refused
    with a JSON-RPC error at once, never put to the client nor left waiting."""

    per_round: int = QUESTIONS_AT_ONCE
    per_call: int = QUESTIONS_PER_CALL


class Calls:
    """Runs calls upstream; owns the background work they leave (cancel notices).
    ``deadline`` bounds each call's whole time upstream (None: no bound), ``waits``
    its time paused on the client."""

    def __init__(
        self,
        ids: Iterator[int],
        deadline: float | None = None,
        questions: QuestionBounds | None = None,
        waits: float = float("inf"),
    ) -> None:
        self.ids = ids
        self.deadline = deadline
        self.waits = waits
        self._deadlines = Deadlines(deadline, waits) if deadline is not None else None
        self.questions = questions or QuestionBounds()
        self._answering = asyncio.Semaphore(ANSWERS_AT_ONCE)
        self._background: set[asyncio.Task[None]] = set()
        self._notices: set[asyncio.Task[None]] = set()

    async def send_answer(
        self, carrier: Carrier, answer: dict[str, Any], headers: Mapping[str, str]
    ) -> None:
        """Send the answer to an upstream request (at most ``ANSWERS_AT_ONCE`` at once)."""
        async with self._answering:
            with contextlib.suppress(CarrierError):
                await carrier.send(answer, headers)

    async def notices_sent(self, within: float) -> None:
        """Until the cancel notices in flight are sent (bounded: a stuck upstream may
        never take them).  An upstream session is ended after them, not before: a
        notice for a session the upstream has just ended would be refused."""
        if self._notices:
            await asyncio.wait(set(self._notices), timeout=within)

    def spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``work`` in the background until it ends or ``close`` cancels it."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    @property
    def deadlines(self) -> Deadlines | None:
        """The route's deadlines for its calls (None: no timeout)."""
        return self._deadlines

    def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self._deadlines is not None:
            self._deadlines.close()

    async def handle(
        self,
        call: Call,
        exchange: Exchange,
        channel: Channel,
        extra_headers: Mapping[str, str] | None = None,
        upstream_id: int | None = None,
    ) -> Outcome:
        """``upstream_id`` is given only by the tracing hook, which runs the call again
        inside its client span (no frame more when tracing is off)."""
        held = held_of(exchange, call)  # sent already by the pass-through lane
        if held is not None and not _sent_on(held, channel):
            held, channel = await _elsewhere(held, channel)
        if held is not None:
            upstream_id = held.upstream_id
        if upstream_id is None:
            upstream_id = next(self.ids)
            if tracing.active is not None:  # OpenTelemetry on: the request as a client span
                return await tracing.active.upstream(
                    self.handle, channel, call, exchange, extra_headers, upstream_id
                )
        inflight = channel.inflight
        if inflight is not None:
            inflight.calls[upstream_id] = (exchange, call.progress_token)
        deadlines = self._deadlines
        clock = deadlines.start() if deadlines is not None else None
        if clock is not None and held is not None and held.due is not None:
            clock.due = held.due  # its time began as the pass-through lane sent it
        try:
            return await self._exchange(
                channel, call, exchange, upstream_id, extra_headers, clock, held
            )
        except asyncio.CancelledError as exc:
            if clock is None or not clock.expired or uncancel() > 0:
                raise  # the client's cancellation (too), not only the deadline's
            if clock.expired == "ask_timeout":
                raise CarrierError(
                    f"the client's answers took longer than the route's ask_timeout of "
                    f"{self.waits:g} s",
                    timeout=True,
                ) from exc
            raise CarrierError(
                f"no answer within the route's timeout of {self.deadline:g} s", timeout=True
            ) from exc
        finally:
            if deadlines is not None and clock is not None:
                deadlines.stop(clock)
            if inflight is not None:
                inflight.calls.pop(upstream_id, None)

    async def _exchange(
        self,
        channel: Channel,
        call: Call,
        exchange: Exchange,
        upstream_id: int,
        extra_headers: Mapping[str, str] | None,
        clock: Clock | None = None,
        held: Held | None = None,
    ) -> Outcome:
        adapter, carrier = channel.adapter, channel.carrier
        if held is None:
            # Progress tokens are rewritten so concurrent clients never collide upstream.
            upstream_call = (
                replace(call, progress_token=upstream_id)
                if call.progress_token is not None
                else call
            )
            message, own = adapter.client_outgoing(upstream_call, upstream_id, channel.session_id)
            headers = {**exchange.forward_headers, **own, **(extra_headers or {})}
        else:
            headers = held.headers
        stoppable = must_notify(adapter, carrier) and call.id is not None
        try:
            reply = held.take() if held is not None else await carrier.request(message, headers)
        except CarrierError as exc:
            if exc.timeout and stoppable:
                # No answer in time: a legacy upstream is told to stop, as the spec asks.
                self.cancel_quietly(carrier, headers, upstream_id, "timed out")
            raise
        except asyncio.CancelledError:
            # Cancelled before the upstream even answered (the client cancelled or left,
            # or the call's time ran out).
            if stoppable:
                self.cancel_quietly(carrier, headers, upstream_id, _why(clock))
            raise
        if reply.status == 404 and channel.session_id is not None:
            # The upstream forgot the session (restarted, or expired it): whatever
            # the body says, the caller opens a new one and retries.
            await reply.aclose()
            raise CarrierError("the upstream no longer knows this session", status=404)
        if reply.status == 400 and channel.session_id is not None:
            reply = await _unless_session_lost(adapter, reply)
        finished = False
        try:
            outcome = await self._read(channel, call, exchange, reply, upstream_id, headers, clock)
            finished = True
            return outcome
        finally:
            await reply.aclose()
            if not finished and stoppable:
                # The client went away (or the time ran out): tell the upstream to stop,
                # unless closing the stream already said so (a stateless server's own
                # POST stream).
                self.cancel_quietly(carrier, headers, upstream_id, _why(clock))

    async def _read(
        self,
        channel: Channel,
        call: Call,
        exchange: Exchange,
        reply: UpstreamReply,
        upstream_id: int,
        headers: Mapping[str, str],
        clock: Clock | None,
    ) -> Outcome:
        """The call's answer, handing on what the upstream says on the way."""
        adapter, token = channel.adapter, call.progress_token
        # The upstream may ask several things at once (a handler awaiting them all):
        # each is answered on its own, while the stream is read on, so that all of
        # them reach the client together.
        answering = _Answering(self, channel, upstream_id, exchange, headers, clock)
        try:
            async for incoming in reply.messages:
                if is_response_to(incoming, upstream_id, reply.status):
                    if exchange.can_park:
                        # A round's questions are the client's next round: the result
                        # is handed on once what it asked has been answered.
                        await answering.all_answered()
                    else:  # the upstream answered without them: withdrawn, at once
                        await answering.withdraw()
                    return adapter.client_read_response(call, incoming)
                if rpc.is_request(incoming):
                    await answering.take(incoming)
                    continue
                event = adapter.client_read_event(incoming)
                if event is None:
                    continue
                if token is not None and event.progress_token == upstream_id:
                    event = replace(event, params={**event.params, "progressToken": token})
                await exchange.emit(event)
        except BaseException:
            answering.stop()  # the caller is gone: nobody will answer what it was asked
            raise
        return Failure(
            FailureKind.UPSTREAM_PROTOCOL, "the upstream ended the exchange without answering"
        )

    def cancel_quietly(
        self,
        carrier: Carrier,
        headers: Mapping[str, str],
        upstream_id: int,
        reason: str = "client went away",
    ) -> None:
        notice = rpc.notification(
            "notifications/cancelled", {"requestId": upstream_id, "reason": reason}
        )

        async def send() -> None:
            with contextlib.suppress(CarrierError):
                await carrier.send(notice, headers)

        # Sent in the background: a stuck upstream, which may not answer this POST
        # either, must not hold back the caller's answer for another timeout.
        task = self.spawn(send())
        self._notices.add(task)
        task.add_done_callback(self._notices.discard)

    async def answer_request(
        self, adapter: Adapter, message: dict[str, Any], ask: Asker | None
    ) -> dict[str, Any]:
        """Answer a request the upstream sent: ping here, asks through ``ask`` (the
        call's client, or a session's); refused when there is nobody to ask."""
        answered = await self.try_answer(adapter, message, ask)
        if answered is not None:
            return answered
        question = next(iter(adapter.client_input_requests(message).values()))
        return adapter.client_answer(message["id"], Answer.refusal(question.kind))

    async def try_answer(
        self, adapter: Adapter, message: dict[str, Any], ask: Asker | None
    ) -> dict[str, Any] | None:
        """As ``answer_request``, but None when the question reached nobody (no one to
        ask, or the call that was to ask it ended first)."""
        method = message.get("method")
        if method == Operation.PING.value:
            return rpc.result(message["id"], {})
        asks = adapter.client_input_requests(message)
        if not asks:
            return rpc.error(message["id"], -32601, f"Method not found: {method}")
        question = next(iter(asks.values()))
        answer = await ask(question) if ask is not None else None
        if answer is None:
            return None
        if question.kind is AskKind.LIST_ROOTS and answer.result is None and answer.error is None:
            answer = Answer(result={"roots": []})
        return adapter.client_answer(message["id"], answer)

    async def listen(
        self, channel: Channel, call: Call, exchange: Exchange
    ) -> AsyncGenerator[Event, None]:
        """A stateless upstream's `subscriptions/listen`: its notifications (the
        acknowledgement first), until the upstream ends it (returns) or the stream is
        lost (raises CarrierError or Failure).  Closing the iterator closes the listen."""
        adapter, carrier = channel.adapter, channel.carrier
        upstream_id = next(self.ids)
        message, own = adapter.client_outgoing(call, upstream_id, None)
        headers = {**exchange.forward_headers, **own}
        reply = await carrier.stream(message, headers)
        answered = False
        try:
            async for incoming in reply.messages:
                if is_response_to(incoming, upstream_id, reply.status):
                    answered = True
                    outcome = adapter.client_read_response(call, incoming)
                    if isinstance(outcome, Failure):
                        raise outcome
                    return  # the upstream ended the listen gracefully
                event = adapter.client_read_event(incoming)
                if event is not None:
                    yield event
            raise CarrierError("the upstream listen stream ended")
        finally:
            await reply.aclose()
            if not answered and must_notify(adapter, carrier):
                self.cancel_quietly(carrier, headers, upstream_id)


async def read_pages(
    operation: Operation, client: ClientContext, run: Callable[[Call], Awaitable[Outcome]]
) -> AsyncIterator[Value]:
    """Every page of a paginated list, read with ``run`` (bounded); stops at a failure."""
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        listing = Call(
            id=0,
            operation=operation,
            method=operation.value,
            params={"cursor": cursor} if cursor else {},
            client=client,
        )
        outcome = await run(listing)
        if not isinstance(outcome, Value):
            return
        yield outcome
        cursor = outcome.result.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            return


async def roundtrip(
    carrier: Carrier,
    message: dict[str, Any],
    headers: Mapping[str, str],
    within: float | None = None,
) -> tuple[dict[str, Any], Mapping[str, str]]:
    """One request outside any call (probe, handshake): its answer and the reply's
    headers, within ``within`` seconds in all (CarrierError when not)."""
    try:
        async with asyncio.timeout(within) as timer:
            exchange = await carrier.request(message, headers)
            try:
                return await final(exchange, message["id"]), exchange.headers
            finally:
                await exchange.aclose()
    except TimeoutError as exc:
        if not timer.expired():
            raise
        raise CarrierError(f"no answer within {within:g} s", timeout=True) from exc


async def _elsewhere(held: Held, channel: Channel) -> tuple[Held | None, Channel]:
    """A reply the lane holds from a session since replaced: one saying that session is
    gone was never run, so the call goes on the session there is now (no reply held);
    any other is read on where it was sent (its questions answered there)."""
    if held.ended_unrun():
        await held.release()  # nothing runs upstream to be told to stop
        return None, channel
    assert held.carrier is not None
    flights = held.inflight if isinstance(held.inflight, InFlight) else None
    return held, Channel(channel.adapter, held.carrier, held.session_id, flights)


def _sent_on(held: Held, channel: Channel) -> bool:
    """Whether the lane sent ``held`` on ``channel``'s session."""
    if held.carrier is None:
        return True  # a reply the lane never got (its error): read as the channel's
    return held.carrier is channel.carrier and held.session_id == channel.session_id


async def _unless_session_lost(adapter: Adapter, reply: UpstreamReply) -> UpstreamReply:
    """A 400 that says the session is unknown is the 404 of a server that forgot it
    (raised as such, so the caller opens a new session); any other 400 is read on."""
    first = await anext(aiter(reply.messages), None)
    if first is not None and adapter.client_names_lost_session(first):
        await reply.aclose()
        raise CarrierError("the upstream refused this session id (HTTP 400)", status=404)

    async def again() -> AsyncIterator[dict[str, Any]]:
        if first is not None:
            yield first
        async for message in reply.messages:
            yield message

    return replace(reply, messages=again())


def listen_named(message: dict[str, Any]) -> Any:
    """The listen a server message names: its subscription id (in ``_meta``), the
    `subscriptions/listen` request's JSON-RPC id; None when it names none.  What the
    shared-channel carriers (stdio, HTTP+SSE) are given to route a listen's messages."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None


def must_notify(adapter: Adapter, carrier: Carrier) -> bool:
    """Whether stopping a call needs a `notifications/cancelled` (not just a closed stream)."""
    return adapter.has_handshake or not carrier.cancels_by_close


class _Answering:
    """The upstream's requests during one call, each answered by a task of its own;
    while any is open the call counts as blocked on an ask (see ``InFlight.owner``)."""

    def __init__(
        self,
        calls: Calls,
        channel: Channel,
        upstream_id: int,
        exchange: Exchange,
        headers: Mapping[str, str],
        clock: Clock | None = None,
    ) -> None:
        self.calls, self.channel, self.upstream_id = calls, channel, upstream_id
        self.exchange, self.headers = exchange, headers
        self.tasks: dict[asyncio.Task[None], dict[str, Any]] = {}  # the question each answers
        self.asking: set[asyncio.Task[None]] = set()  # of those, the ones the client holds
        self.clock = clock
        self.asked = 0  # requests the upstream sent in this call

    async def take(self, message: dict[str, Any]) -> None:
        """Answer ``message`` (in a task of its own), or refuse it at once when the
        call is past its bounds: awaited, so a flood is refused one by one over one
        connection instead of fanning out."""
        bounds = self.calls.questions
        self.asked += 1
        if len(self.tasks) < bounds.per_round and self.asked <= bounds.per_call:
            self.start(message)
            return
        log.warning(
            "refused an upstream request past the call's bound",
            route=self.exchange.route,
            principal=self.exchange.principal,
            method=str(message.get("method"))[:64],
            open=len(self.tasks),
            asked=self.asked,
            per_round=bounds.per_round,
            per_call=bounds.per_call,
        )
        refusal = rpc.error(
            message["id"],
            -32603,  # internal error: the refusal is the gateway's, not the client's
            f"the gateway takes at most {bounds.per_round} open requests at once and"
            f" {bounds.per_call} in all from one call",
        )
        await self.calls.send_answer(self.channel.carrier, refusal, self.headers)

    def start(self, message: dict[str, Any]) -> None:
        if self.channel.inflight is not None:
            self.channel.inflight.waiting.add(self.upstream_id)
        if not self.tasks and self.clock is not None:
            self.clock.pause()  # the upstream waits on the client now, not we on it
        task = self.calls.spawn(self._answer(message))
        self.tasks[task] = message
        self.asking.add(task)
        task.add_done_callback(self._done)

    async def _answer(self, message: dict[str, Any]) -> None:
        answer = await self.calls.answer_request(self.channel.adapter, message, self.exchange.ask)
        task = asyncio.current_task()
        if task is not None:
            self.asking.discard(task)  # answered: on its way upstream
        await self.calls.send_answer(self.channel.carrier, answer, self.headers)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.pop(task, None)
        self.asking.discard(task)
        if not self.tasks and self.clock is not None:
            self.clock.resume()
        if not self.tasks and self.channel.inflight is not None:
            self.channel.inflight.waiting.discard(self.upstream_id)
        if not task.cancelled() and task.exception() is not None:
            log.warning("answering an upstream request failed", error=repr(task.exception()))

    async def all_answered(self) -> None:
        if self.tasks:
            await asyncio.wait(set(self.tasks))

    async def withdraw(self) -> None:
        """The upstream answered the call: the questions its client still holds are
        withdrawn (cancelled toward the client, where its revision says so) and
        refused toward the upstream (on a shared channel a question may have been the
        server's own, not the call's: it waits for an answer); the answers already on
        their way upstream finish."""
        for task in list(self.asking):
            task.cancel()
            message = self.tasks.get(task)
            if message is not None:  # the upstream gets its answer: a refusal
                refusal = rpc.error(message["id"], -32603, "the call it came with was answered")
                self.calls.spawn(
                    self.calls.send_answer(self.channel.carrier, refusal, self.headers)
                )
        await self.all_answered()

    def stop(self) -> None:
        """The call was abandoned: what it asked no longer needs an answer.  Ended
        by the bound on waiting for the client, each open question is refused (the
        upstream may still be waiting on it as it reads the cancel notice)."""
        waited = self.clock is not None and self.clock.expired == "ask_timeout"
        for task, message in list(self.tasks.items()):
            task.cancel()
            if waited:
                refusal = rpc.error(
                    message["id"], -32603, "the client did not answer within ask_timeout"
                )
                self.calls.spawn(
                    self.calls.send_answer(self.channel.carrier, refusal, self.headers)
                )


def _why(clock: Clock | None) -> str:
    """The reason a stopped call's cancel notice gives."""
    return "timed out" if clock is not None and clock.expired else "client went away"


def quiet(exchange: Exchange) -> Exchange:
    """``exchange`` for a call the gateway makes on its own: no events, no asks."""
    return replace(exchange, emit=discard_event, ask=None, extra={})
