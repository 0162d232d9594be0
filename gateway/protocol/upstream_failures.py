"""The one table of the upstream's failures: for each kind, what the client is told
happened, whether the call may have run, whether (and when) it may be sent again,
and how every revision says it (the HTTP status where the client's transport has
one, the JSON-RPC code).

A client that follows the advice never runs a tool twice by it: only a request that
was not sent gets ``Retry-After``; one that may have run says so and gets none.
docs/using/operations.md shows this table (``python -m gateway.protocol.upstream_failures``
prints it; a test keeps them the same).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from gateway.core import FailureKind

__all__ = ["TABLE", "UpstreamFailure", "markdown", "told"]


@dataclass(frozen=True)
class UpstreamFailure:
    headline: str  # what went wrong, in the client's words (never the upstream's)
    said: str  # what it means for the call, said after what went wrong ("": nothing)
    may_have_run: bool
    retry_after: int | None  # seconds to wait before sending it again; None: no advice
    status: int  # HTTP status for a client whose transport has one (2026-07-28)
    code: int  # the JSON-RPC error code, every revision


RUN_MAYBE = "it was sent, so it may have run: check its effect before calling it again"
NOT_SENT = "the request was not sent; it may be sent again"
TABLE: dict[FailureKind, UpstreamFailure] = {
    FailureKind.UPSTREAM_UNAVAILABLE: UpstreamFailure(
        "its server could not be reached", NOT_SENT, False, 5, 503, -32603
    ),
    FailureKind.UPSTREAM_LOST: UpstreamFailure(
        "its server's answer was lost", RUN_MAYBE, True, None, 502, -32603
    ),
    FailureKind.UPSTREAM_TIMEOUT: UpstreamFailure(
        "the call timed out", RUN_MAYBE, True, None, 504, -32603
    ),
    FailureKind.UPSTREAM_REFUSED: UpstreamFailure(
        "its server answered with an error", RUN_MAYBE, True, None, 502, -32603
    ),
    FailureKind.UPSTREAM_DOWN: UpstreamFailure(
        "every server of the route is down", NOT_SENT, False, 5, 503, -32000
    ),
    FailureKind.UPSTREAM_NOT_STARTED: UpstreamFailure(
        "its server could not be started",
        "waiting will not help: the route's operator must fix it",
        False,
        None,
        502,
        -32603,
    ),
    FailureKind.UPSTREAM_CREDENTIALS: UpstreamFailure(
        "its server refused the credentials the route sets",
        "it did not run; waiting will not help: the route's operator must fix them",
        False,
        None,
        502,
        -32603,
    ),
    FailureKind.UPSTREAM_PROTOCOL: UpstreamFailure(
        "its server's answer could not be used", "", True, None, 200, -32603
    ),
}
# What the gateway calls each kind in the table's first column.
NAMES = {
    FailureKind.UPSTREAM_UNAVAILABLE: "not sent (refused, no such host, TLS failed)",
    FailureKind.UPSTREAM_LOST: "sent, answer lost (closed or reset after the request)",
    FailureKind.UPSTREAM_TIMEOUT: "timed out",
    FailureKind.UPSTREAM_REFUSED: "refused by the upstream (its HTTP 5xx)",
    FailureKind.UPSTREAM_DOWN: "every target down",
    FailureKind.UPSTREAM_NOT_STARTED: "could not start (a stdio command)",
    FailureKind.UPSTREAM_CREDENTIALS: "refused the route's own credentials (its 401/403)",
    FailureKind.UPSTREAM_PROTOCOL: "an answer that cannot be used",
}


def told(failure: UpstreamFailure, detail: str = "") -> str:
    """What the client is told: the headline, a detail in brackets where there is
    one (what a library's words mean, the upstream's HTTP status), then the meaning."""
    said = f"{failure.headline} ({detail})" if detail else failure.headline
    return f"{said}; {failure.said}" if failure.said else said


def markdown() -> str:
    """The table as docs/using/operations.md shows it."""
    lines = [
        "| what happened | may have run | sent again by the client | 2026-07-28 HTTP status"
        " | handshake-era HTTP status | JSON-RPC code | the client is told |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, failure in TABLE.items():
        again = f"after {failure.retry_after} s (`Retry-After`)" if failure.retry_after else "no"
        lines.append(
            f"| {NAMES[kind]} | {'yes' if failure.may_have_run else 'no'} | {again}"
            f" | {failure.status} | 200 | {failure.code} | {told(failure)} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - the generator
    sys.stdout.write(markdown())
