"""Exchange.routed is dataclasses.replace of its asker and event sink, field for field."""

from __future__ import annotations

from dataclasses import fields

from gateway.core import Call, ClientContext, Downstream, Exchange, Operation, ServerProfile
from gateway.core.exchange import discard_event
from gateway.core.preamble import SessionView


async def _ask(ask: object) -> None:
    return None


async def _emit(event: object) -> None:
    return None


def test_routed_keeps_every_other_field() -> None:
    call = Call(1, Operation.TOOLS_CALL, "tools/call", {"name": "x"}, ClientContext("v", {}))
    exchange = Exchange(
        call=call,
        route="/mcp",
        profile=ServerProfile(),
        principal="p",
        forward_headers={"x-a": "1"},
        emit=discard_event,
        ask=None,
        can_park=True,
        session=SessionView("s", "v"),
        downstream=Downstream("k", None, discard_event),
        extra={"e": 1},
    )
    routed = exchange.routed(_ask, _emit)
    assert routed.ask is _ask and routed.emit is _emit
    for f in fields(Exchange):
        if f.name not in ("ask", "emit"):
            assert getattr(routed, f.name) is getattr(exchange, f.name), f.name
