"""What a call produced: a value, a request for more input, or a failure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.core.ask import Ask
from gateway.core.failure import Failure


@dataclass(frozen=True, slots=True)
class Value:
    """A complete result, in the richest form any revision knows.

    Adapters project it down for older clients; fields no adapter knows pass
    through untouched.
    """

    result: dict[str, Any]


@dataclass(frozen=True, slots=True)
class InputRequired:
    """The call needs answers from the client before it can complete.

    ``asks`` are keyed as the client will key its answers; ``state`` is opaque
    to everyone but its issuer and comes back verbatim on the retry.
    """

    asks: dict[str, Ask] = field(default_factory=dict)
    state: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


Outcome = Value | InputRequired | Failure


@dataclass(frozen=True, slots=True)
class Event:
    """A notification from the server side (progress, log, list change ...)."""

    method: str
    params: dict[str, Any]

    @property
    def progress_token(self) -> str | int | None:
        token = self.params.get("progressToken")
        return token if isinstance(token, str | int) else None
