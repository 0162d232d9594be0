"""Recent calls: a bounded ring per route of what each finished call was (revisions,
method, name, outcome, latency, the principal's digest, the trace id), and, when
recording bodies is on, both of the client's messages, redacted and cut."""

from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import orjson
import structlog

from gateway.console.wiretap import UpstreamWires
from gateway.core import Failure, ServerProfile
from gateway.core.call import Call
from gateway.core.log_context import REQUEST_CONTEXT
from gateway.core.outcome import InputRequired, Outcome
from gateway.core.redaction import redact
from gateway.transport.call_record import OUTCOME_NAMES

__all__ = ["CallRecord", "RecentCalls", "redact"]


@dataclass(slots=True)
class CallRecord:
    number: int
    at: float  # wall clock, for the page
    route: str
    client_revision: str
    upstream_revision: str | None
    method: str
    name: str | None
    outcome: str
    latency_ms: float
    answered: int  # answers the client brought (a continued round: more than 0)
    asked: int  # questions the call's outcome put to the client
    principal: str  # the first 12 hex digits of the principal's keyed digest
    trace_id: str | None
    request_id: str | None
    client_sent: str | None  # JSON text, redacted and cut; None when not recorded
    client_got: str | None
    upstream_got: str | None  # what the gateway sent upstream for it
    upstream_sent: str | None  # what the upstream answered (and asked)


class RecentCalls:
    """One ring per route, of at most ``size`` records each."""

    def __init__(
        self, size: int, *, bodies: bool, body_chars: int, upstream: UpstreamWires | None = None
    ) -> None:
        self.size = size
        self.upstream = upstream
        self.bodies = bodies
        self.body_chars = body_chars
        self.rings: dict[str, deque[CallRecord]] = {}
        self._numbers = itertools.count(1)

    def tap(self, route: str, upstream: Any) -> Any:
        """The route's call tap (gateway/transport/route.py's ``CallTap``)."""
        ring = self.rings.setdefault(route, deque(maxlen=self.size))

        def record(
            call: Call,
            client_revision: str,
            principal: str,
            profile: ServerProfile,
            outcome: Outcome,
            message: dict[str, Any] | None,
            started: float,
        ) -> None:
            ring.append(
                self._record(
                    route,
                    upstream,
                    call,
                    client_revision,
                    principal,
                    profile,
                    outcome,
                    message,
                    started,
                )
            )

        return record

    def _record(
        self,
        route: str,
        upstream: Any,
        call: Call,
        client_revision: str,
        principal: str,
        profile: ServerProfile,
        outcome: Outcome,
        message: dict[str, Any] | None,
        started: float,
    ) -> CallRecord:
        # The request's own fields, under what a span bound since (its trace ids).
        context = {**(REQUEST_CONTEXT.get() or {}), **structlog.contextvars.get_contextvars()}
        versions = profile.versions
        sent = got = up_got = up_sent = None
        if self.bodies:
            sent = self.cut(redact({"method": call.method, "id": call.id, "params": call.params}))
            got = self.cut(redact(message)) if message is not None else None
            wire = self.upstream.take(call) if self.upstream is not None else None
            if wire is not None:
                up_got = self.cut(redact([m for d, m in wire if d == "sent"]))
                up_sent = self.cut(redact([m for d, m in wire if d == "got"]))
        return CallRecord(
            number=next(self._numbers),
            at=time.time(),
            route=route,
            client_revision=client_revision,
            upstream_revision=versions[0] if versions else upstream.upstream_revision,
            method=call.method,
            name=call.name,
            outcome=outcome_name(outcome),
            latency_ms=round((time.perf_counter() - started) * 1000, 2),
            answered=len(call.answers or ()),
            asked=len(outcome.asks) if isinstance(outcome, InputRequired) else 0,
            principal=principal[:12],
            trace_id=_text(context.get("trace_id")),
            request_id=_text(context.get("request_id")),
            client_sent=sent,
            client_got=got,
            upstream_got=up_got,
            upstream_sent=up_sent,
        )

    def cut(self, value: Any) -> str:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()
        if len(text) > self.body_chars:
            # ASCII only: one non-ASCII character would double the string's memory.
            return text[: self.body_chars] + f"\n... cut ({len(text)} characters in all)"
        return text

    def find(self, number: int) -> CallRecord | None:
        for ring in self.rings.values():
            for item in ring:
                if item.number == number:
                    return item
        return None

    def select(
        self, route: str | None = None, revision: str | None = None, outcome: str | None = None
    ) -> list[CallRecord]:
        """The newest first, filtered by route, client revision and outcome."""
        found = [
            item
            for path, ring in self.rings.items()
            if not route or path == route
            for item in ring
            if (not revision or item.client_revision == revision)
            and (not outcome or item.outcome == outcome)
        ]
        found.sort(key=lambda item: item.number, reverse=True)
        return found


def outcome_name(outcome: Outcome) -> str:
    return outcome.kind.value if isinstance(outcome, Failure) else OUTCOME_NAMES[type(outcome)]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
