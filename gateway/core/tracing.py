"""Where a call's path meets OpenTelemetry tracing, and whether tracing is on.

``active`` is None unless tracing was started (``gateway.otel.start``, when the
standard ``OTEL_*`` environment asks for it).  Each hook on a call's path is one
read of ``tracing.active`` at its caller: with tracing off the call enters
nothing of this module or of ``gateway.otel``, and opentelemetry is never
imported.  What a hook does is :class:`Tracing`'s, implemented in
``gateway/otel/`` (which may import every layer; this module imports only the
core, so every layer may read it).

It lives in the core because every layer reads it and it names only core types;
the hooks it declares are implemented in ``gateway/otel/``.

Read it as ``tracing.active`` at the call, never ``from gateway.core.tracing import
active`` (that would keep the None it had at import).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar

from gateway.core import Call, Exchange, Outcome

A = TypeVar("A")
S = TypeVar("S")
R = TypeVar("R")
C = TypeVar("C")


class Tracing(Protocol):
    """The hooks, one per place a call's path passes."""

    def serve(
        self, run: Callable[[A, Call, S], Awaitable[R]], route: Any, arrival: A, call: Call, send: S
    ) -> Awaitable[R]:
        """An inbound request's call (``run(arrival, call, send)``) as a server span."""
        ...

    def upstream(
        self,
        run: Callable[[Call, Exchange, C, Mapping[str, str] | None, int], Awaitable[Outcome]],
        channel: C,
        call: Call,
        exchange: Exchange,
        extra_headers: Mapping[str, str] | None,
        upstream_id: int,
    ) -> Awaitable[Outcome]:
        """One request upstream (``run(call, exchange, channel, headers, id)``) as a
        client span, its trace context passed on in the call's ``_meta`` and headers."""
        ...

    def stamp(self, claims: dict[str, Any]) -> None:
        """A ``requestState`` being sealed: the trace its retry joins goes in it."""
        ...

    def observe(self, record: dict[str, Any]) -> None:
        """A route observer (first of them): the finished call's record on its span,
        and the span's ids in the record (logs, the latency histogram's exemplars)."""
        ...


class CallObserver(Protocol):
    """What a route tells of each finished call (logs, metrics, the span)."""

    def observe(self, record: dict[str, Any]) -> None: ...


active: Tracing | None = None
