"""Per-request context: everything about one request that is not the request itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.core.ask import Answer, Ask
from gateway.core.call import Call
from gateway.core.catalog import ServerProfile
from gateway.core.outcome import Event
from gateway.core.preamble import SessionView

EventSink = Callable[[Event], Awaitable[None]]
# Puts one ask to the downstream client and waits for its answer; None when the
# client's revision or transport cannot carry that ask as a request.
Asker = Callable[[Ask], Awaitable[Answer | None]]


async def discard_event(event: Event) -> None:
    """The null event sink: for events with nobody to hear them."""
    return


@dataclass(eq=False, slots=True)
class Downstream:
    """A client's own session, as the upstream side sees it: where the upstream's
    messages that belong to no call go (its standalone stream).

    ``key`` names the session (stable for its whole life); ``ask`` puts a question
    to the client on that stream (None: its revision cannot be asked there);
    ``notify`` hands it a notification; ``carries_asks`` says the client answers
    questions its revision cannot express through tool arguments, so an upstream
    session of its own may declare them.
    """

    key: str
    ask: Asker | None
    notify: EventSink
    carries_asks: bool = False
    # Set once the client's session has ended: nothing is opened upstream for it after.
    ended: bool = False


@dataclass(slots=True)
class Exchange:
    """One client request on its way through the gateway.

    ``principal`` identifies the caller for state binding (a digest of its
    credentials, never the credentials); ``forward_headers`` are the inbound
    headers the route forwards upstream; ``emit`` delivers events (progress,
    logs) on the stream the request belongs to; ``ask`` puts a question to the
    client where its revision and transport can carry one (None elsewhere);
    ``can_park`` says the client's revision carries state between rounds.
    """

    call: Call
    route: str
    profile: ServerProfile
    principal: str = "anonymous"
    forward_headers: dict[str, str] = field(default_factory=dict)
    emit: EventSink = discard_event
    ask: Asker | None = None
    # The client carries state between rounds (input_required, or asks in arguments).
    can_park: bool = False
    session: SessionView | None = None
    # The client's own session, for what the upstream sends outside any call (None:
    # a stateless client, whose upstream session is shared by a capability-true pool).
    downstream: Downstream | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def routed(self, ask: Asker | None, emit: EventSink) -> Exchange:
        """This exchange with its asks and events going elsewhere: what
        ``dataclasses.replace`` does, without its field-by-field introspection on
        every call (every field is passed on: keep this in step with them)."""
        return Exchange(
            call=self.call,
            route=self.route,
            profile=self.profile,
            principal=self.principal,
            forward_headers=self.forward_headers,
            emit=emit,
            ask=ask,
            can_park=self.can_park,
            session=self.session,
            downstream=self.downstream,
            extra=self.extra,
        )
