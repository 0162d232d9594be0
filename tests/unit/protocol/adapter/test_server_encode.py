"""Server-role encode, per revision: values, input_required, failures, events, asks."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import (
    Ask,
    AskKind,
    Call,
    ClientContext,
    Event,
    Failure,
    FailureKind,
    InputRequired,
    Operation,
    ServerProfile,
    Value,
)
from gateway.protocol.adapter import ANSWERS_ARGUMENT, STATE_ARGUMENT, Adapter
from gateway.protocol.selection import AdapterSet

SET = AdapterSet.default()
VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
LEGACY = VERSIONS[:4]
MODERN = "2026-07-28"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

PROFILE = ServerProfile(
    info={
        "name": "upstream",
        "version": "2.0",
        "title": "Upstream",
        "description": "d",
        "icons": [{"src": "https://x/i.png"}],
        "websiteUrl": "https://x",
        "x-vendor": 1,
    },
    capabilities={"tools": {"listChanged": True}},
    cache_ttl_ms=5000,
    cache_scope="public",
)
CACHEABLE_OPS = [
    Operation.DISCOVER,
    Operation.TOOLS_LIST,
    Operation.RESOURCES_LIST,
    Operation.RESOURCES_TEMPLATES_LIST,
    Operation.RESOURCES_READ,
    Operation.PROMPTS_LIST,
]
UNCACHED_OPS = [Operation.TOOLS_CALL, Operation.PROMPTS_GET, Operation.COMPLETE, Operation.OTHER]


def adapter(version: str) -> Adapter:
    return SET.by_version[version]


def call(version: str, operation: Operation, params: dict[str, Any] | None = None) -> Call:
    return Call(
        id=11,
        operation=operation,
        method=operation.value if operation is not Operation.OTHER else "acme/x",
        params=params or {},
        client=ClientContext(version),
    )


def encode(version: str, op: Operation, outcome: Any, params: Any = None) -> dict[str, Any]:
    message = adapter(version).encode(call(version, op, params), PROFILE, outcome)
    assert message is not None
    assert message["jsonrpc"] == "2.0"
    assert message["id"] == 11
    return message


# ------------------------------------------------------------------ values


@pytest.mark.parametrize("op", CACHEABLE_OPS, ids=lambda o: o.value)
def test_2026_cacheable_results_get_synthesized_hints(op: Operation) -> None:
    result = encode(MODERN, op, Value({"x": 1}))["result"]
    assert result["resultType"] == "complete"
    assert result["ttlMs"] == 5000
    assert result["cacheScope"] == "public"
    assert result["_meta"][SERVER_INFO]["name"] == "upstream"
    assert result["x"] == 1


def test_2026_defaults_come_from_the_profile() -> None:
    profile = ServerProfile()
    message = adapter(MODERN).encode(call(MODERN, Operation.TOOLS_LIST), profile, Value({}))
    assert message is not None
    result = message["result"]
    assert result["ttlMs"] == 0
    assert result["cacheScope"] == "private"
    assert result["_meta"][SERVER_INFO] == {"name": "upstream", "version": "0"}


def test_2026_upstream_hints_win() -> None:
    value = Value({"tools": [], "ttlMs": 10, "cacheScope": "private", "resultType": "complete"})
    result = encode(MODERN, Operation.TOOLS_LIST, value)["result"]
    assert result["ttlMs"] == 10
    assert result["cacheScope"] == "private"


def test_2026_server_info_is_projected_and_upstream_meta_kept() -> None:
    value = Value({"tools": [], "_meta": {"traceparent": "t", "com.acme/x": [1]}})
    result = encode(MODERN, Operation.TOOLS_LIST, value)["result"]
    assert result["_meta"]["traceparent"] == "t"
    assert result["_meta"]["com.acme/x"] == [1]
    assert result["_meta"][SERVER_INFO] == PROFILE.info


@pytest.mark.parametrize("op", UNCACHED_OPS, ids=lambda o: o.value)
def test_2026_uncacheable_results_get_no_hints(op: Operation) -> None:
    result = encode(MODERN, op, Value({"content": [], "messages": []}))["result"]
    assert result["resultType"] == "complete"
    assert "ttlMs" not in result
    assert "cacheScope" not in result
    assert SERVER_INFO in result["_meta"]


@pytest.mark.parametrize("version", LEGACY)
@pytest.mark.parametrize("op", CACHEABLE_OPS + UNCACHED_OPS, ids=lambda o: o.value)
def test_legacy_results_are_stripped(version: str, op: Operation) -> None:
    value = Value(
        {
            "resultType": "complete",
            "ttlMs": 100,
            "cacheScope": "public",
            "nextCursor": "n",
            "x-vendor": {"a": 1},
            "_meta": {"k": "v"},
        }
    )
    result = encode(version, op, value)["result"]
    assert "resultType" not in result
    assert "ttlMs" not in result
    assert "cacheScope" not in result
    assert result["nextCursor"] == "n"
    assert result["x-vendor"] == {"a": 1}
    assert result["_meta"] == {"k": "v"}


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_does_not_mutate_the_value(version: str) -> None:
    original = {
        "content": [{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}],
        "structuredContent": [1, 2],
        "_meta": {"a": 1},
    }
    import copy

    before = copy.deepcopy(original)
    encode(version, Operation.TOOLS_CALL, Value(original))
    encode(version, Operation.TOOLS_LIST, Value({"tools": [{"name": "t"}], "_meta": {}}))
    assert original == before


@pytest.mark.parametrize("version", VERSIONS)
def test_notifications_get_no_response(version: str) -> None:
    note = Call(
        id=None,
        operation=Operation.CANCELLED,
        method="notifications/cancelled",
        params={},
        client=ClientContext(version),
    )
    assert adapter(version).encode(note, PROFILE, Value({})) is None


# ------------------------------------------------------------ input_required

ELICIT = Ask(
    AskKind.ELICIT,
    {
        "message": "Who are you?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
        "elicitationId": "e-1",
        "_meta": {"upstream": True},
        "task": {"ttl": 1},
    },
)
SAMPLE = Ask(AskKind.SAMPLE, {"messages": [], "maxTokens": 10})
ROOTS = Ask(AskKind.LIST_ROOTS, {})
NEEDS = InputRequired(asks={"who": ELICIT, "llm": SAMPLE}, state="sealed-state", meta={"m": 1})


def test_2026_input_required_shape() -> None:
    result = encode(MODERN, Operation.TOOLS_CALL, NEEDS)["result"]
    assert result["resultType"] == "input_required"
    assert result["requestState"] == "sealed-state"
    assert result["_meta"] == {"m": 1}
    assert set(result["inputRequests"]) == {"who", "llm"}
    who = result["inputRequests"]["who"]
    assert who["method"] == "elicitation/create"
    assert who["params"] == {
        "message": "Who are you?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    }
    assert result["inputRequests"]["llm"] == {
        "method": "sampling/createMessage",
        "params": {"messages": [], "maxTokens": 10},
    }
    assert "ttlMs" not in result
    assert "content" not in result


def test_2026_input_required_state_only() -> None:
    result = encode(MODERN, Operation.PROMPTS_GET, InputRequired(state="s"))["result"]
    assert result == {"resultType": "input_required", "requestState": "s"}


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
def test_old_tools_call_input_required_becomes_a_tool_result(version: str) -> None:
    message = encode(version, Operation.TOOLS_CALL, NEEDS)
    assert "error" not in message
    result = message["result"]
    assert result["isError"] is False
    assert "resultType" not in result
    text = result["content"][0]["text"]
    assert result["content"][0]["type"] == "text"
    assert ANSWERS_ARGUMENT in text
    assert STATE_ARGUMENT in text
    assert "sealed-state" in text
    assert "`who`" in text and "`llm`" in text
    assert "Who are you?" in text
    assert '"properties"' in text  # the answer schema is spelled out


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
def test_old_input_required_elsewhere_is_an_error(version: str) -> None:
    message = encode(version, Operation.PROMPTS_GET, NEEDS)
    assert message["error"]["code"] == -32602
    assert "result" not in message


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
@pytest.mark.parametrize("op", [Operation.TOOLS_CALL, Operation.PROMPTS_GET])
def test_pushing_revisions_get_missing_capability(version: str, op: Operation) -> None:
    message = encode(version, op, NEEDS)
    error = message["error"]
    assert error["code"] == -32602
    assert error["data"]["requiredCapabilities"] == {
        "elicitation": {"form": {}},
        "sampling": {},
    }
    assert "elicitation/create" in error["message"]


# ------------------------------------------------------------------ failures

LEGACY_CODES: dict[FailureKind, int] = {
    FailureKind.PARSE_ERROR: -32700,
    FailureKind.INVALID_REQUEST: -32600,
    FailureKind.UNKNOWN_METHOD: -32601,
    FailureKind.INVALID_PARAMS: -32602,
    FailureKind.INTERNAL: -32603,
    FailureKind.RESOURCE_NOT_FOUND: -32002,
    FailureKind.INVALID_ARGUMENTS: -32602,
    FailureKind.MISSING_CAPABILITY: -32602,
    FailureKind.UNSUPPORTED_VERSION: -32602,
    FailureKind.HEADER_MISMATCH: -32600,
    FailureKind.URL_ELICITATION_REQUIRED: -32603,
    FailureKind.SAMPLING_REJECTED: -1,
    FailureKind.SESSION_REQUIRED: -32600,
    FailureKind.SESSION_NOT_FOUND: -32001,
    FailureKind.FORBIDDEN: -32600,
    FailureKind.UNAUTHORIZED: -32600,
    FailureKind.NOT_ACCEPTABLE: -32600,
    FailureKind.UNSUPPORTED_MEDIA_TYPE: -32600,
    FailureKind.PAYLOAD_TOO_LARGE: -32600,
    FailureKind.METHOD_NOT_ALLOWED: -32600,
    FailureKind.QUOTA_EXCEEDED: -32000,
    FailureKind.RATE_LIMITED: -32000,
    FailureKind.OVERLOADED: -32000,
    FailureKind.UPSTREAM_UNAVAILABLE: -32603,
    FailureKind.UPSTREAM_LOST: -32603,
    FailureKind.UPSTREAM_DOWN: -32000,  # every target out: try again after retryAfterSeconds
    FailureKind.UPSTREAM_TIMEOUT: -32603,
    FailureKind.UPSTREAM_REFUSED: -32603,
    FailureKind.UPSTREAM_NOT_STARTED: -32603,
    FailureKind.UPSTREAM_CREDENTIALS: -32603,
    FailureKind.UPSTREAM_PROTOCOL: -32603,
    FailureKind.UPSTREAM_ERROR: -32603,  # with no upstream code to pass through
}
EXPECTED_CODES: dict[str, dict[FailureKind, int]] = {
    "2024-11-05": LEGACY_CODES,
    "2025-03-26": LEGACY_CODES,
    "2025-06-18": LEGACY_CODES,
    "2025-11-25": {**LEGACY_CODES, FailureKind.URL_ELICITATION_REQUIRED: -32042},
    MODERN: {
        **LEGACY_CODES,
        FailureKind.RESOURCE_NOT_FOUND: -32602,
        FailureKind.MISSING_CAPABILITY: -32021,
        FailureKind.UNSUPPORTED_VERSION: -32022,
        FailureKind.HEADER_MISMATCH: -32020,
    },
}
LEGACY_STATUSES: dict[FailureKind, int] = {
    FailureKind.PARSE_ERROR: 400,
    FailureKind.INVALID_REQUEST: 400,
    FailureKind.UNSUPPORTED_VERSION: 400,
    FailureKind.HEADER_MISMATCH: 400,
    FailureKind.SESSION_REQUIRED: 400,
    FailureKind.SESSION_NOT_FOUND: 404,
    FailureKind.FORBIDDEN: 403,
    FailureKind.UNAUTHORIZED: 401,
    FailureKind.NOT_ACCEPTABLE: 406,
    FailureKind.UNSUPPORTED_MEDIA_TYPE: 415,
    FailureKind.PAYLOAD_TOO_LARGE: 413,
    FailureKind.METHOD_NOT_ALLOWED: 405,
    FailureKind.QUOTA_EXCEEDED: 429,
    FailureKind.RATE_LIMITED: 429,
    FailureKind.OVERLOADED: 503,
}
EXPECTED_STATUSES: dict[str, dict[FailureKind, int]] = {
    **dict.fromkeys(LEGACY, LEGACY_STATUSES),
    MODERN: {
        **LEGACY_STATUSES,
        FailureKind.UNKNOWN_METHOD: 404,
        FailureKind.INVALID_PARAMS: 400,
        FailureKind.RESOURCE_NOT_FOUND: 400,
        FailureKind.MISSING_CAPABILITY: 400,
        FailureKind.UNSUPPORTED_VERSION: 400,
        FailureKind.HEADER_MISMATCH: 400,
        FailureKind.UPSTREAM_UNAVAILABLE: 503,  # not sent: send again (Retry-After)
        FailureKind.UPSTREAM_LOST: 502,  # sent, the answer lost: it may have run
        FailureKind.UPSTREAM_DOWN: 503,
        FailureKind.UPSTREAM_TIMEOUT: 504,
        FailureKind.UPSTREAM_REFUSED: 502,  # the upstream's own 5xx
        FailureKind.UPSTREAM_NOT_STARTED: 502,
        FailureKind.UPSTREAM_CREDENTIALS: 502,
    },
}
FAILURE_CASES = [(v, k) for v in VERSIONS for k in FailureKind]


@pytest.mark.parametrize(("version", "kind"), FAILURE_CASES, ids=lambda x: str(x))
def test_failure_code_and_status(version: str, kind: FailureKind) -> None:
    failure = Failure(kind, "what happened", {"detail": 1})
    a = adapter(version)
    assert a.error_code(failure) == EXPECTED_CODES[version][kind]
    assert a.http_status(failure) == EXPECTED_STATUSES[version].get(kind, 200)
    message = a.encode_failure("x", failure, Operation.PROMPTS_GET)
    assert message == {
        "jsonrpc": "2.0",
        "id": "x",
        "error": {
            "code": EXPECTED_CODES[version][kind],
            "message": "what happened",
            "data": {"supported": [], "requested": None}
            if kind is FailureKind.UNSUPPORTED_VERSION
            else {"detail": 1},
        },
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_modern_only_codes_never_leak(version: str) -> None:
    emitted = {adapter(version).error_code(Failure(k, "m")) for k in FailureKind}
    if version == MODERN:
        assert {-32020, -32021, -32022} <= emitted
        assert -32002 not in emitted
        assert -32042 not in emitted
    else:
        assert not emitted & {-32020, -32021, -32022}
        assert -32002 in emitted
    assert (-32042 in emitted) == (version == "2025-11-25")


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_method_status(version: str) -> None:
    failure = Failure(FailureKind.UNKNOWN_METHOD, "no")
    assert adapter(version).http_status(failure) == (404 if version == MODERN else 200)
    assert adapter(version).error_code(failure) == -32601


@pytest.mark.parametrize("version", VERSIONS)
def test_invalid_arguments_is_always_a_tool_result(version: str) -> None:
    failure = Failure(FailureKind.INVALID_ARGUMENTS, "b: field required")
    message = encode(version, Operation.TOOLS_CALL, failure)
    assert "error" not in message
    result = message["result"]
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "b: field required"}]
    if version == MODERN:
        assert result["resultType"] == "complete"  # required on every 2026 result
    else:
        assert "resultType" not in result
    assert adapter(version).http_status(failure) == 200


@pytest.mark.parametrize("version", VERSIONS)
def test_unsupported_version_data_is_normalized(version: str) -> None:
    failure = Failure(
        FailureKind.UNSUPPORTED_VERSION,
        "Unsupported protocol version: 1999-01-01",
        {"supported": [MODERN], "requested": "1999-01-01", "internal": "x"},
    )
    error = adapter(version).encode_failure(1, failure)["error"]
    assert error["data"] == {"supported": [MODERN], "requested": "1999-01-01"}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("code", [-32000, -32050, 42, -32603, -32042, -1])
def test_upstream_codes_pass_through(version: str, code: int) -> None:
    failure = Failure(FailureKind.UPSTREAM_ERROR, "upstream said no", {"u": 1}, code=code)
    message = encode(version, Operation.TOOLS_CALL, failure)
    assert message["error"] == {"code": code, "message": "upstream said no", "data": {"u": 1}}


@pytest.mark.parametrize("version", VERSIONS)
def test_upstream_resource_not_found_code(version: str) -> None:
    failure = Failure(FailureKind.UPSTREAM_ERROR, "Resource not found", code=-32002)
    message = encode(version, Operation.RESOURCES_READ, failure)
    assert message["error"]["code"] == (-32602 if version == MODERN else -32002)
    assert "data" not in message["error"]


@pytest.mark.parametrize("version", VERSIONS)
def test_failure_without_id(version: str) -> None:
    message = adapter(version).encode_failure(None, Failure(FailureKind.PARSE_ERROR, "bad"))
    assert message == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "bad"}}


# ------------------------------------------------------------------- events

PROGRESS = Event(
    "notifications/progress",
    {"progressToken": "t", "progress": 1, "total": 3, "message": "one of three"},
)
EVENT_AVAILABILITY: dict[str, set[str]] = {
    "notifications/progress": set(VERSIONS),
    "notifications/message": set(VERSIONS),
    "notifications/cancelled": set(VERSIONS),
    "notifications/resources/updated": set(VERSIONS),
    "notifications/resources/list_changed": set(VERSIONS),
    "notifications/tools/list_changed": set(VERSIONS),
    "notifications/prompts/list_changed": set(VERSIONS),
    "notifications/elicitation/complete": {"2025-11-25"},
    "notifications/tasks/status": {"2025-11-25"},
    "notifications/subscriptions/acknowledged": {MODERN},
    "notifications/tasks": {MODERN},
    "notifications/acme/vendor": set(),
    "notifications/roots/list_changed": set(),
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("method", sorted(EVENT_AVAILABILITY))
def test_event_availability(version: str, method: str) -> None:
    event = Event(method, {"a": 1})
    message = adapter(version).encode_event(event)
    if version in EVENT_AVAILABILITY[method]:
        assert message == {"jsonrpc": "2.0", "method": method, "params": {"a": 1}}
    else:
        assert message is None


@pytest.mark.parametrize("version", VERSIONS)
def test_progress_message_dropped_only_on_2024_11_05(version: str) -> None:
    message = adapter(version).encode_event(PROGRESS)
    assert message is not None
    params = message["params"]
    assert params["progressToken"] == "t"
    assert params["progress"] == 1
    assert params["total"] == 3
    assert ("message" in params) == (version != "2024-11-05")
    assert PROGRESS.params["message"] == "one of three"  # the event itself is untouched


def test_2026_listen_events_are_tagged() -> None:
    event = Event("notifications/tools/list_changed", {"_meta": {"k": "v"}})
    message = adapter(MODERN).encode_event(event, listen_id="listen-1")
    assert message is not None
    assert message["params"]["_meta"] == {"k": "v", SUBSCRIPTION_ID: "listen-1"}
    assert event.params == {"_meta": {"k": "v"}}
    untagged = adapter(MODERN).encode_event(event)
    assert untagged is not None
    assert SUBSCRIPTION_ID not in untagged["params"]["_meta"]
    bare = adapter(MODERN).encode_event(Event("notifications/resources/updated", {"uri": "u"}), 7)
    assert bare is not None
    assert bare["params"] == {"uri": "u", "_meta": {SUBSCRIPTION_ID: 7}}


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_events_are_never_tagged(version: str) -> None:
    event = Event("notifications/tools/list_changed", {})
    message = adapter(version).encode_event(event, listen_id="listen-1")
    assert message == {"jsonrpc": "2.0", "method": event.method, "params": {}}
