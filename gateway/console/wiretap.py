"""The playground's own wire: the adapters its client speaks with, each a subclass of
the real revision's adapter that notes every message it builds or reads into the
running playground call's list (a context variable).  Used only by the playground's
links: the gateway's routes never see these adapters."""

from __future__ import annotations

import contextvars
from typing import Any

from gateway.core import Answer, Ask, Call, Outcome
from gateway.protocol import Adapter, AdapterSet

__all__ = ["WIRE", "Wire", "recording_adapters"]

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


def _recording(base: type[Adapter]) -> type[Adapter]:
    class Recording(base):  # type: ignore[valid-type,misc]
        def client_opening(self, *args: Any, **kwargs: Any) -> Any:
            message = super().client_opening(*args, **kwargs)
            _note("sent", message)
            return message

        def client_request(self, call: Call, request_id: Any) -> Any:
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


def recording_adapters(adapters: AdapterSet) -> AdapterSet:
    return AdapterSet(_recording(type(adapter))() for adapter in adapters.adapters)
