"""Wires as the gateway's own client side sees them: adapters that are subclasses of
the real revisions' adapters and note every message they build or read into the
running call's list (a context variable).  Two users: the playground's client (its
task sets the list), and, only while the console records bodies, the routes' links
to their upstreams (each upstream request starts a list, kept by the client's call
until the console's tap takes it).  With the console off, no route sees them."""

from __future__ import annotations

import contextvars
from collections import OrderedDict
from typing import Any

from gateway.core import Answer, Ask, Call, Outcome
from gateway.protocol import Adapter, AdapterSet

__all__ = ["WIRE", "UpstreamWires", "Wire", "recording_adapters"]

# (direction, message): "sent" by the playground's client, or "got" by it.
Wire = list[tuple[str, Any]]
WIRE: contextvars.ContextVar[Wire | None] = contextvars.ContextVar("console_wire", default=None)
# The most messages one playground call keeps.
MAX_MESSAGES = 64


def _note(direction: str, message: Any) -> None:
    wire = WIRE.get()
    if wire is None or len(wire) >= MAX_MESSAGES:
        return
    if wire and wire[-1][1] is message:  # one message read twice (asks are looked at again)
        return
    wire.append((direction, message))


# Upstream wires not yet taken (a call that never reaches the tap): the oldest go.
MAX_PENDING = 1024


class UpstreamWires:
    """The routes' upstream messages, by the client's call they were sent for."""

    def __init__(self) -> None:
        self._wires: OrderedDict[tuple[int, Any], Wire] = OrderedDict()

    @staticmethod
    def key(call: Call) -> tuple[int, Any]:
        # The client's context object lives as long as the call (kept across the
        # bridge's rewrites), and request ids are unique among a client's calls.
        return (id(call.client), call.id)

    def begin(self, call: Call) -> None:
        wire: Wire = []
        WIRE.set(wire)
        key = self.key(call)
        self._wires[key] = wire
        self._wires.move_to_end(key)
        while len(self._wires) > MAX_PENDING:
            self._wires.popitem(last=False)

    def take(self, call: Call) -> Wire | None:
        return self._wires.pop(self.key(call), None)


def _recording(base: type[Adapter], wires: UpstreamWires | None) -> type[Adapter]:
    class Recording(base):  # type: ignore[valid-type,misc]
        def client_opening(self, *args: Any, **kwargs: Any) -> Any:
            message = super().client_opening(*args, **kwargs)
            _note("sent", message)
            return message

        def client_request(self, call: Call, request_id: Any) -> Any:
            if wires is not None:
                wires.begin(call)
            message = super().client_request(call, request_id)
            _note("sent", message)
            return message

        def client_input_requests(self, message: Any) -> dict[str, Ask]:
            _note("got", message)
            asks: dict[str, Ask] = super().client_input_requests(message)
            return asks

        def client_read_response(self, call: Call, message: Any) -> Outcome:
            _note("got", message)
            outcome: Outcome = super().client_read_response(call, message)
            return outcome

        def client_answer(self, ask_id: Any, answer: Answer) -> Any:
            message = super().client_answer(ask_id, answer)
            _note("sent", message)
            return message

    Recording.__name__ = Recording.__qualname__ = f"Recording{base.__name__}"
    return Recording


def recording_adapters(adapters: AdapterSet, wires: UpstreamWires | None = None) -> AdapterSet:
    """``adapters`` as recording subclasses (``wires``: a route link's, each upstream
    request starting a wire; else the playground's, whose task sets the wire)."""
    return AdapterSet(_recording(type(adapter), wires)() for adapter in adapters.adapters)
