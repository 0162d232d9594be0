"""Running and resuming parked calls: a handshake-era upstream's call, asked for
input mid-call, for a client that can only be answered and retried.

The call's phases and moves, and the table it waits in, are :mod:`.rounds`'s;
this runs them.  The first request starts the upstream call in a task and
waits for what comes first: the result, or a round of questions handed out as
``input_required`` with a sealed state; the retry that carries the answers
finds the call in the parking table again, answers the waiting questions and
waits for the next of the two.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Protocol

from gateway.bridge.rounds import ParkedCall, ParkingTable, Phase
from gateway.bridge.state import StateSealer
from gateway.core import (
    Answer,
    Ask,
    AskKind,
    Call,
    Event,
    EventSink,
    Exchange,
    Failure,
    FailureKind,
    InputRequired,
    Outcome,
    Value,
    discard_event,
)
from gateway.protocol import adapter_of
from gateway.upstream.passthrough import HELD, Held

# How many waits of ``ask_settle`` one round's gathering may take.
MAX_ASKS_PER_ROUND = 32
# The pass-through lane's send of a call, on the exchange its questions go to: a
# plain result (a Value), the reply held for the full path, or None (not sent).
Lane = Callable[[Exchange], Awaitable[object]]


class Handles(Protocol):
    """What running a parked call needs of the route's upstream."""

    async def handle(self, call: Call, exchange: Exchange) -> Outcome: ...


class ParkedCalls:
    """The parked calls of one route."""

    def __init__(
        self,
        upstream: Handles,
        parking: ParkingTable,
        sealer: StateSealer,
        ask_settle: float,
    ) -> None:
        self.upstream = upstream
        self.parking = parking
        self.sealer = sealer
        self.ask_settle = ask_settle

    async def handle(self, call: Call, exchange: Exchange, lane: Lane | None = None) -> Outcome:
        """Run a call whose upstream may ask mid-call, for a client that must be
        answered: its result, or the first round of questions.  ``lane``: the call is
        first sent by the pass-through lane, from the parked call's task (a question
        the upstream asks off the call's stream meanwhile is this call's, as on the
        full path), which reads on from its held reply."""
        parked = ParkedCall()
        push = exchange.ask
        parked.principal = exchange.principal  # whose quota of parked calls it counts in

        async def ask(question: Ask) -> Answer | None:
            if push is not None:
                pushed = await push(question)
                if pushed is not None:
                    return pushed  # the client's revision carries this ask natively
            if not question.allowed_by(call.client.capabilities):
                parked.missing = question
                parked.questions.changed.set()
                return Answer.refusal(question.kind)
            return await parked.questions.ask(question)[1]

        async def emit(event: Event) -> None:
            await parked.emit(event)

        parked.emit = exchange.emit
        inner = exchange.routed(ask, emit)
        upstream = self._upstream(call, inner, parked, lane)
        parked.task = asyncio.get_running_loop().create_task(upstream)
        return await self._next_round(call, exchange, parked)

    async def _upstream(
        self, call: Call, exchange: Exchange, parked: ParkedCall, lane: Lane | None
    ) -> Outcome:
        """The parked call's upstream side.  Its end wakes _next_round as an ask does, from
        its own last step: by the time _next_round runs the task is done, and no done
        callback costs a turn of the loop in between."""
        held: Held | None = None
        try:
            if lane is not None:
                sent = await lane(exchange)
                if isinstance(sent, Held):
                    held = exchange.extra[HELD] = sent  # the full path reads on from it
                elif isinstance(sent, Value):
                    return sent  # the plain result
                elif sent is not None:  # sent, and answered as no full path reads on
                    raise AssertionError(f"the lane answered {type(sent).__name__}")
            return await self.upstream.handle(call, exchange)
        finally:
            try:
                if held is not None and not held.taken:
                    await held.abandon()  # ended (released, say) before the path took it
            finally:
                parked.questions.changed.set()

    async def _next_round(self, call: Call, exchange: Exchange, parked: ParkedCall) -> Outcome:
        """Wait for the upstream's result, or for asks to hand to the client."""
        assert parked.task is not None
        try:
            while True:
                ended = self._ended(call, exchange, parked)
                if ended is not None:
                    return ended
                if parked.questions.unanswered():
                    # Questions asked together (a server awaiting several at once) make
                    # one round: wait a moment for the rest before answering.
                    parked.move(Phase.GATHERING)
                    await self._gather_asks(parked)
                    if parked.task.done() or parked.missing is not None:
                        continue
                    return self._hand_out(call, exchange, parked)
                parked.questions.changed.clear()
                await parked.questions.changed.wait()  # an ask, or the end of the task
        except asyncio.CancelledError:
            # The client went away while we waited.  Nobody holds a state for what was
            # asked meanwhile (it is handed out only in the answer), so nobody can resume
            # the call: refuse those asks and end it; without asks, just stop it.
            if parked.questions.unanswered():
                self.parking.release(parked)
            else:
                parked.move(Phase.RELEASED)
                parked.task.cancel()
            raise

    def _ended(self, call: Call, exchange: Exchange, parked: ParkedCall) -> Outcome | None:
        """The outcome when the call is over (it asked what the client cannot answer, or
        the upstream answered); None while it goes on."""
        assert parked.task is not None
        if parked.missing is not None:
            # The refusal is on its way to the upstream: let it arrive (and the call
            # end) before the call is cancelled, not cut it off mid-send.
            parked.move(Phase.MISSING)
            self.parking.release(parked)
            return missing(parked.missing)
        if parked.task.done():
            # Questions that came in as it ended (off-call ones attributed to it) were
            # never put to the client: handed back, not left waiting.
            parked.move(Phase.DONE)
            parked.unasked()
            self.parking.unpark(parked)
            return self._url_asks(call, exchange, parked.task.result())
        return None

    def _hand_out(self, call: Call, exchange: Exchange, parked: ParkedCall) -> Outcome:
        """This round's questions, as input_required with a sealed state naming it."""
        asks = parked.questions.unanswered()
        parked.round += 1
        parked.emit = discard_event  # no request of the client is open
        parked.move(Phase.PARKED)
        self.parking.park(parked)
        body = {"k": "parked", "i": parked.id, "n": parked.round}
        state = self.sealer.seal(call, exchange.route, exchange.principal, body)
        return InputRequired(asks=asks, state=state)

    async def _gather_asks(self, parked: ParkedCall) -> None:
        """Wait while more asks keep arriving within ``ask_settle`` seconds of each
        other (bounded); sequential asks, each awaited upstream, stay separate rounds."""
        assert parked.task is not None
        for _ in range(MAX_ASKS_PER_ROUND):
            arrived = await parked.questions.next_change(parked.task, self.ask_settle)
            if not arrived or parked.task.done():
                return

    async def resume(self, call: Call, exchange: Exchange, claims: dict[str, Any]) -> Outcome:
        """The client's retry, with the claims of the state it carries."""
        if claims.get("k") == "again":
            # The upstream wanted URL elicitations done first: call it again.
            return await self.handle(replace(call, state=None, answers=None), exchange)
        parked = self.parking.get(str(claims.get("i")))
        if parked is None and claims.get("o", self.sealer.owner) != self.sealer.owner:
            return Failure(
                FailureKind.INVALID_PARAMS,
                "the gateway replica that held this call is gone; "
                "start the call again without requestState",
            )
        if parked is None:
            return Failure(
                FailureKind.INVALID_PARAMS,
                "requestState refers to a call that has ended or expired; call again",
            )
        if parked.phase is not Phase.PARKED or claims.get("n") != parked.round:
            return Failure(FailureKind.INVALID_PARAMS, "requestState was already used")
        refused = self._check_answers(call, parked)
        if refused is not None:
            return refused  # the round stays open: the client may answer again
        # Taken at once, with no wait since the check: a second retry finds it RUNNING.
        parked.move(Phase.RUNNING)
        parked.emit = progress_as(exchange.emit, call.progress_token)
        parked.questions.answer(call.answers or {})
        self.parking.unpark(parked)
        return await self._next_round(call, exchange, parked)

    def _check_answers(self, call: Call, parked: ParkedCall) -> Failure | None:
        """The client's answers answer what was asked: no unknown keys, each of the
        shape its ask's method returns.  Nothing malformed reaches the upstream."""
        adapter = adapter_of(call.client)  # the one that decoded the call
        if adapter is None:
            return Failure(FailureKind.INTERNAL, "no adapter decoded this call")
        asked = parked.questions.unanswered()
        for key, answer in (call.answers or {}).items():
            ask = asked.get(key)
            if ask is None:
                return Failure(
                    FailureKind.INVALID_PARAMS,
                    f"no input request {key[:64]!r} is waiting for an answer",
                    {"expected": sorted(asked)},
                )
            problem = adapter.check_answer(ask, answer)
            if problem is not None:
                return Failure(FailureKind.INVALID_PARAMS, f"{key}: {problem}")
        return None

    def _url_asks(self, call: Call, exchange: Exchange, outcome: Outcome) -> Outcome:
        """A handshake-era upstream's "URL elicitation required" error becomes, for a
        client that carries state, input_required with those URL elicitations; its
        retry calls the upstream again (the out-of-band step is done by then)."""
        if not (
            isinstance(outcome, Failure) and outcome.kind is FailureKind.URL_ELICITATION_REQUIRED
        ):
            return outcome
        data = outcome.data if isinstance(outcome.data, dict) else {}
        listed = data.get("elicitations")
        if not exchange.can_park or not isinstance(listed, list) or not listed:
            return outcome
        asks: dict[str, Ask] = {}
        for number, params in enumerate(listed, 1):
            if not isinstance(params, dict):
                return outcome
            ask = Ask(AskKind.ELICIT, {**params, "mode": "url"})
            if not ask.allowed_by(call.client.capabilities):
                return missing(ask)
            asks[f"url{number}"] = ask
        state = self.sealer.seal(call, exchange.route, exchange.principal, {"k": "again"})
        return InputRequired(asks=asks, state=state)


def progress_as(emit: EventSink, token: str | int | None) -> EventSink:
    """The parked call's progress, told as the open request's: each retry carries a
    progress token of its own, and its client follows only that one (none: it asked
    for no progress)."""

    async def sink(event: Event) -> None:
        if event.progress_token is None:
            await emit(event)
        elif token is not None:
            await emit(replace(event, params={**event.params, "progressToken": token}))

    return sink


def missing(ask: Ask) -> Failure:
    """The failure for an ask the client's declared capabilities do not allow."""
    return Failure(
        FailureKind.MISSING_CAPABILITY,
        f"the server needs {ask.method}, which this client did not declare",
        {"requiredCapabilities": ask.capability()},
    )
