"""Whether one target of a route may take calls: passive outlier ejection, re-admission.

A target is *in* until it fails ``eject_after`` times in a row (a connection that
could not be made, the upstream unreachable or too slow to answer, an HTTP 5xx) or an
active check finds it down; then it is *out* for a back-off that doubles with each
ejection in a row (``base`` to ``ceiling`` seconds).  Once the back-off has passed it
is *on trial*: the next active check or call decides, a success re-admits it (the
back-off starts again from ``base``), a failure sends it out for longer.

Some reasons are cleared by one kind of success only (:class:`Readmit`): a target
that speaks another protocol era than its route's is out until a check finds it
speaking the route's era (a call that happens to succeed proves nothing of the
kind), and takes no call meanwhile; a target out for time-outs is taken back only by
a call that succeeds (its check, a ping, answers while every tool hangs), its trials
one call at a time, each failed one sending it out for twice as long.

Plain state, no I/O and no clock of its own: the caller passes ``now`` (monotonic
seconds), so the rules are tested without waiting.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from gateway.core import Failure, FailureKind

# Failures that count against a target: it could not be reached or did not answer.
# A JSON-RPC error, a refused credential or the client's own bad request do not.
COUNTED = frozenset(
    {
        FailureKind.UPSTREAM_UNAVAILABLE,
        FailureKind.UPSTREAM_LOST,
        FailureKind.UPSTREAM_TIMEOUT,
        FailureKind.UPSTREAM_REFUSED,
        FailureKind.UPSTREAM_NOT_STARTED,
        FailureKind.UPSTREAM_PROTOCOL,
    }
)
DEFAULT_EJECT_AFTER = 3
DEFAULT_BACKOFF = 2.0
DEFAULT_BACKOFF_CEILING = 60.0


class State(enum.Enum):
    IN = "up"
    OUT = "ejected"
    TRIAL = "trial"


class Readmit(enum.Enum):
    """What success takes an ejected target back."""

    ANY = "any"  # a passing check or a call that succeeds
    CHECK = "check"  # only a passing check (no call is sent to it meanwhile)
    CALL = "call"  # only a call that succeeds (its trials one at a time, on a back-off)


def counts_against(failure: Failure) -> bool:
    """Whether a call's failure says something about the target (not the client)."""
    status = failure.data.get("status") if isinstance(failure.data, dict) else None
    if failure.kind in (FailureKind.UPSTREAM_PROTOCOL, FailureKind.UPSTREAM_REFUSED) and (
        status is not None
    ):
        # A 4xx is the request's (or the route's own credentials refused: every
        # target alike, and no reason to take one out).
        return isinstance(status, int) and status >= 500
    if failure.kind is FailureKind.UPSTREAM_PROTOCOL:
        return False
    return failure.kind in COUNTED


@dataclass
class Health:
    """One target's standing."""

    eject_after: int = DEFAULT_EJECT_AFTER
    base: float = DEFAULT_BACKOFF
    ceiling: float = DEFAULT_BACKOFF_CEILING
    state: State = State.IN
    failures: int = 0  # in a row
    ejections: int = 0  # in a row (reset by a success)
    ejected_total: int = 0
    until: float = 0.0  # out until then (monotonic seconds)
    reason: str = ""  # why it is out, for the operator (never a client)
    readmit: Readmit = Readmit.ANY  # what takes it back while it is out
    history: list[tuple[float, str]] = field(default_factory=list, repr=False)

    def usable(self, now: float) -> bool:
        """May take a call now: in, or out long enough to be tried again (by a call:
        not while only a check may take it back)."""
        if self.state is State.OUT and now >= self.until and self.readmit is not Readmit.CHECK:
            self.state = State.TRIAL
        return self.state is not State.OUT

    def succeeded(self, now: float, by: Readmit = Readmit.CALL) -> None:
        """A success of kind ``by``: a call's (CALL) or a check's (CHECK)."""
        if self.state is not State.IN:
            if self.readmit not in (Readmit.ANY, by):
                return  # this kind of success does not clear why it is out
            self._note(now, "re-admitted")
        self.state, self.failures, self.ejections, self.reason = State.IN, 0, 0, ""
        self.readmit = Readmit.ANY

    def failed(
        self, now: float, reason: str, *, at_once: bool = False, readmit: Readmit = Readmit.ANY
    ) -> None:
        """A counted failure; ``at_once``: a check that found the target down (no
        need to wait for more calls to fail on it); ``readmit``: what may take it
        back once it is out for this."""
        self.failures += 1
        if self.state is State.TRIAL or at_once or self.failures >= self.eject_after:
            self._eject(now, reason)
            if readmit is not Readmit.ANY:  # a stricter reason stands until cleared
                self.readmit = readmit

    def retry_after(self, now: float) -> int:
        """Whole seconds until it may be tried again (at least 1)."""
        return max(1, math.ceil(self.until - now))

    def _eject(self, now: float, reason: str) -> None:
        backoff = min(self.ceiling, self.base * (2**self.ejections))
        self.state, self.until, self.reason = State.OUT, now + backoff, reason
        self.ejections += 1
        self.ejected_total += 1
        self.failures = 0
        self._note(now, f"ejected for {backoff:g}s")

    def _note(self, now: float, what: str) -> None:
        self.history.append((now, what))
        del self.history[:-16]  # the last few moves, for /readyz and tests
