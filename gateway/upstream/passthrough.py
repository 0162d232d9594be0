"""The pass-through lane's upstream side: a call sent on without the full path's
layers, its answer handed back as the upstream sent it (a call of the upstream's own
revision) or as the upstream's adapter reads it (a handshake-era client's call to a
stateless upstream, which the client's adapter encodes as on the full path).

The request is what the full path would send (the same adapter encodes it, with the
same upstream request id and progress token); what is skipped is the work around
it that a call of the same revision does not need.  The upstream's first message
decides the rest: the call's plain, complete result is the answer; anything else (an
error, a question, a notification first, a broken or late reply) is *held* and the
full path reads on from exactly there (:class:`Held`), so everything it does with
an answer -- failure wording, retries, questions, events -- is its own, unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol

from gateway.core import Call, Exchange, Operation, ServerProfile, Value
from gateway.protocol import Adapter
from gateway.upstream.carriers.base import (
    Carrier,
    CarrierError,
    Message,
    UpstreamReply,
    is_response_to,
)
from gateway.upstream.deadlines import Clock, Deadlines, uncancel


class Flights(Protocol):
    """The calls in flight on an upstream session (upstream/calls.py's ``InFlight``)."""

    calls: dict[int, tuple[Exchange, str | int | None]]


class Watch(Protocol):
    """What was asked of a client through an exchange (upstream/retry.py's ``AskWatch``)."""

    asked: bool
    exchange: Exchange


# Where a held reply travels to the full path (``Exchange.extra``).
HELD = "held"


class Park:
    """The lane's word that a call must be sent from a parked call's task: its
    session's server may ask off the call's stream, and only a parked call can put
    such a question to a client that cannot be asked (a stateless one)."""


PARK = Park()


@dataclass(slots=True)
class Held:
    """A call already sent upstream, whose reply its own full path reads (once).

    Until it is taken the call stays in flight on its session (``inflight``), so a
    message the upstream sends off the call's stream in between is still its;
    ``watch`` saw whatever the lane asked the client meanwhile (a retry must not ask
    again); ``stop`` tells a handshake-era upstream the call is over.  ``carrier``
    and ``session_id``: where it was sent (the session may be replaced before the
    full path reads on)."""

    call: Call
    upstream_id: int
    headers: dict[str, str]
    reply: UpstreamReply | None = None
    error: CarrierError | None = None
    carrier: Carrier | None = None
    session_id: str | None = None
    # When the call's time runs out (its clock started as the lane sent it).
    due: float | None = None
    watch: Watch | None = None
    inflight: Flights | None = None
    stop: Callable[[str], None] | None = None
    # The reply's own messages, behind the one put back (closed here if never read).
    source: AsyncIterator[Message] | None = None
    taken: bool = False

    def take(self) -> UpstreamReply:
        if self.error is not None:
            raise self.error
        assert self.reply is not None
        return self.reply

    def ended_unrun(self) -> bool:
        """The upstream refused it for a session it no longer knows (404): never run."""
        return self.reply is not None and self.reply.status == 404

    async def abandon(self) -> None:
        """Never taken (the full path did not run, or the request went away first):
        out of flight, closed, and a call still running upstream told to stop."""
        if self.taken:
            return
        self.taken = True
        await self.release(self.stop)

    async def release(self, stop: Callable[[str], None] | None = None) -> None:
        """Out of flight and closed (``stop``: a call still running upstream told)."""
        if self.inflight is not None:
            self.inflight.calls.pop(self.upstream_id, None)
        if self.reply is not None:
            await _close(self.reply)
            closer = getattr(self.source, "aclose", None)
            if closer is not None:
                with contextlib.suppress(Exception):
                    await closer()
            if stop is not None:
                stop("client went away")


def held_of(exchange: Exchange, call: Call) -> Held | None:
    """The held reply of ``call`` an exchange carries, taken: only by that call's own
    request (a listing the full path makes first, on a quiet copy of the exchange,
    never takes it; a retry sends afresh)."""
    extra = exchange.extra
    held = extra.get(HELD) if extra else None
    if not isinstance(held, Held) or held.call is not call or held.taken:
        return None
    del extra[HELD]
    held.taken = True
    return held


@dataclass(slots=True)
class Sending:
    """One call the lane sends: in ``adapter``'s revision on ``carrier``, as the full
    path would (the same request id and progress token rewriting), held to the route's
    ``deadlines``; ``on_cancel(headers, id, reason)`` tells the upstream a call is
    over, where closing the request does not (a handshake-era one).  ``translate``:
    the client speaks another revision, so a plain result is read by ``adapter`` into
    the Value the full path's reading makes of it, never handed on as written."""

    adapter: Adapter
    carrier: Carrier
    upstream_id: int
    deadlines: Deadlines | None
    profile: ServerProfile
    on_cancel: Callable[[Mapping[str, str], int, str], None] | None = None
    watch: Watch | None = None
    translate: bool = False

    async def send(
        self, call: Call, exchange: Exchange, session_id: str | None, inflight: Flights | None
    ) -> dict[str, Any] | Value | Held:
        """The call's plain result, or its reply held for the full path; in flight on
        its upstream session meanwhile (a question off the call's stream is its)."""
        upstream_id, token = self.upstream_id, call.progress_token
        sent = replace(call, progress_token=upstream_id) if token is not None else call
        message, own = self.adapter.client_outgoing(sent, upstream_id, session_id)
        headers = {**exchange.forward_headers, **own}
        if inflight is not None:
            watched = self.watch.exchange if self.watch is not None else exchange
            inflight.calls[upstream_id] = (watched, token)
        try:
            outcome = await self._send(call, message, headers)
        except BaseException:
            if inflight is not None:
                inflight.calls.pop(upstream_id, None)
            raise
        if isinstance(outcome, Held):  # in flight until its full path takes it over
            outcome.inflight, outcome.watch = inflight, self.watch
            outcome.carrier, outcome.session_id = self.carrier, session_id
            if self.on_cancel is not None:
                outcome.stop = partial(self.on_cancel, headers, upstream_id)
        elif inflight is not None:
            inflight.calls.pop(upstream_id, None)
        return outcome

    async def _send(
        self, call: Call, message: Message, headers: dict[str, str]
    ) -> dict[str, Any] | Value | Held:
        upstream_id, deadlines = self.upstream_id, self.deadlines
        clock = deadlines.start() if deadlines is not None else None
        due = clock.due if clock is not None else None
        reply: UpstreamReply | None = None
        try:
            reply = await self.carrier.request(message, headers)
            first = await anext(reply.messages, None)
        except CarrierError as exc:
            _stop_clock(deadlines, clock)
            await _close(reply)
            if reply is not None and not exc.timeout and self.on_cancel is not None:
                # Broken while read: told, as the full path's reading tells it (a
                # timeout is told where the full path takes the error over).
                self.on_cancel(headers, upstream_id, "client went away")
            return Held(call, upstream_id, headers, error=exc, due=due)
        except asyncio.CancelledError:
            _stop_clock(deadlines, clock)
            late = deadlines is not None and clock is not None and bool(clock.expired)
            if late and not uncancel():
                assert deadlines is not None
                timeout = f"no answer within the route's timeout of {deadlines.budget:g} s"
                await _close(reply)
                return Held(call, upstream_id, headers, error=CarrierError(timeout, timeout=True))
            await _close(reply)
            if self.on_cancel is not None:
                self.on_cancel(headers, upstream_id, "timed out" if late else "client went away")
            raise
        _stop_clock(deadlines, clock)
        result = await self._plain(call, reply, first)
        if result is not None:
            return result
        again = replace(reply, messages=_again(first, reply.messages))
        return Held(call, upstream_id, headers, again, due=due, source=reply.messages)

    async def _plain(
        self, call: Call, reply: UpstreamReply, first: Message | None
    ) -> dict[str, Any] | Value | None:
        """The result of a first message that is the call's plain answer (the reply
        closed then); None: the full path reads on."""
        if first is None or reply.status != 200:
            return None
        if not is_response_to(first, self.upstream_id, reply.status):
            return None
        result: dict[str, Any] | Value | None
        if self.translate:
            # What the full path's reading makes of it (calls._read): a result that is
            # no question (an error or input_required is read on by the full path),
            # which the client's adapter then encodes as the full path does.
            read = self.adapter.client_read_response(call, first)
            result = read if isinstance(read, Value) else None
        else:
            result = self.adapter.verbatim_result(call.operation, first, self.profile)
        if result is not None:
            await reply.aclose()
        return result


def _stop_clock(deadlines: Deadlines | None, clock: Clock | None) -> None:
    """The lane's clock stops before anything else is awaited (a deadline firing while
    a reply closes would cancel the request itself)."""
    if deadlines is not None and clock is not None:
        deadlines.stop(clock)


async def _close(reply: UpstreamReply | None) -> None:
    if reply is not None:
        with contextlib.suppress(Exception):
            await reply.aclose()


async def _again(first: Message | None, rest: AsyncIterator[Message]) -> AsyncIterator[Message]:
    """The reply's messages with the one already read put back in front."""
    try:
        if first is not None:
            yield first
        async for message in rest:
            yield message
    finally:
        closer = getattr(rest, "aclose", None)
        if closer is not None:
            await closer()


def tool_plain(operation: Operation, facts: Any, headers: bool) -> bool:
    """A tools/call's tool, as the caller's list said: not a task-only tool, and where
    the upstream takes ``headers`` (Streamable HTTP of the stateless era), known, with
    no header parameters to mint or check (prompts need no facts)."""
    if operation is not Operation.TOOLS_CALL:
        return True
    if facts is None:
        return not headers
    return not facts.param_paths and not facts.declared and facts.task_support != "required"
