"""One finished call as the route's observers (its log line, its metrics) are told it."""

from __future__ import annotations

import time
from typing import Any

from gateway.core import Call, Failure, InputRequired, Operation, Outcome, ServerProfile, Value

# A finished call's outcome as the log, the metrics and the spans spell it.
OUTCOME_NAMES: dict[type, str] = {Value: "ok", InputRequired: "input_required"}
# The parameter that names what a call is about, on its log line: (field, param).
NAMED_BY = {
    Operation.TOOLS_CALL: ("tool", "name"),
    Operation.PROMPTS_GET: ("prompt", "name"),
    Operation.RESOURCES_READ: ("resource", "uri"),
}
# The longest such name logged (a client may send any length).
MAX_LOGGED_NAME = 200


def call_record(
    route: str,
    call: Call,
    client_revision: str,
    profile: ServerProfile,
    outcome: Outcome,
    at: float,
    upstream_revision: str | None = None,
) -> dict[str, Any]:
    """The record of a call that began at ``at`` (``perf_counter``); the upstream's
    revision is the profile's first, else ``upstream_revision``."""
    versions = profile.versions
    outcome_name = (
        outcome.kind.value if isinstance(outcome, Failure) else OUTCOME_NAMES[type(outcome)]
    )
    return {
        "route": route,
        "method": call.method,
        **_named(call),
        "client_revision": client_revision,
        "upstream_revision": versions[0] if versions else upstream_revision,
        "outcome": outcome_name,
        "duration_ms": round((time.perf_counter() - at) * 1000, 3),
    }


def _named(call: Call) -> dict[str, str]:
    """The tool, prompt or resource a call is about, for its log line."""
    named = NAMED_BY.get(call.operation)
    if named is None or not isinstance(call.params, dict):
        return {}
    value = call.params.get(named[1])
    return {named[0]: value[:MAX_LOGGED_NAME]} if isinstance(value, str) else {}
