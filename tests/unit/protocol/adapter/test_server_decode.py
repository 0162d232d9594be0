"""Server-role decode, per revision: every client message each revision defines."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import (
    Call,
    ClientReply,
    DecodeFailure,
    FailureKind,
    Operation,
    Preamble,
    SessionView,
)
from gateway.protocol.adapter import Adapter
from gateway.protocol.selection import AdapterSet

SET = AdapterSet.default()
VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
LEGACY = VERSIONS[:4]
MODERN = "2026-07-28"

PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
LEVEL = "io.modelcontextprotocol/logLevel"

CLIENT_CAPS = {"roots": {}, "sampling": {}, "elicitation": {"form": {}}}
CLIENT_INFO = {"name": "test-client", "version": "1.0"}
SESSION_CAPS = {"roots": {"listChanged": True}, "sampling": {}}


def adapter(version: str) -> Adapter:
    return SET.by_version[version]


def modern_meta(**extra: Any) -> dict[str, Any]:
    return {PV: MODERN, CAPS: dict(CLIENT_CAPS), INFO: dict(CLIENT_INFO), **extra}


def session(version: str) -> SessionView:
    return SessionView(
        id="s-1",
        protocol_version=version,
        capabilities=dict(SESSION_CAPS),
        info={"name": "legacy-client", "version": "0.1"},
        log_level="info",
    )


def message(
    version: str,
    method: str,
    params: dict[str, Any] | None = None,
    id_: Any = 1,
    *,
    notification: bool = False,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A message as a client of ``version`` would send it (2026 requests carry `_meta`)."""
    params = dict(params or {})
    if version == MODERN and not notification:
        params["_meta"] = {**modern_meta(), **(meta or {})}
    elif meta:
        params["_meta"] = dict(meta)
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if not notification:
        body["id"] = id_
    return body


def preamble(version: str, body: Any, *, with_session: bool = True) -> Preamble:
    has_session = with_session and adapter(version).has_handshake
    return Preamble(body=body, session=session(version) if has_session else None)


def decode(version: str, body: Any, *, with_session: bool = True) -> list[Any]:
    return adapter(version).decode(preamble(version, body, with_session=with_session))


def decode_one(version: str, body: Any, *, with_session: bool = True) -> Any:
    items = decode(version, body, with_session=with_session)
    assert len(items) == 1
    return items[0]


def call_of(version: str, body: Any) -> Call:
    item = decode_one(version, body)
    assert isinstance(item, Call), item
    return item


def failure_of(version: str, body: Any) -> DecodeFailure:
    item = decode_one(version, body)
    assert isinstance(item, DecodeFailure), item
    return item


# --------------------------------------------------------------- inventories

COMMON_REQUESTS: dict[str, dict[str, Any]] = {
    "tools/list": {"cursor": "page-2"},
    "tools/call": {"name": "add", "arguments": {"a": 1, "b": 2}},
    "resources/list": {},
    "resources/templates/list": {"cursor": "c"},
    "resources/read": {"uri": "file:///a.txt"},
    "prompts/list": {},
    "prompts/get": {"name": "greet", "arguments": {"who": "world"}},
    "completion/complete": {
        "ref": {"type": "ref/prompt", "name": "greet"},
        "argument": {"name": "who", "value": "wo"},
    },
}
LEGACY_REQUESTS: dict[str, dict[str, Any]] = {
    "ping": {},
    "resources/subscribe": {"uri": "file:///a.txt"},
    "resources/unsubscribe": {"uri": "file:///a.txt"},
    "logging/setLevel": {"level": "warning"},
}
LEGACY_NOTIFICATIONS: dict[str, dict[str, Any]] = {
    "notifications/initialized": {},
    "notifications/cancelled": {"requestId": 3, "reason": "user"},
    "notifications/progress": {"progressToken": "t", "progress": 1, "total": 2},
    "notifications/roots/list_changed": {},
}
TASK_REQUESTS: dict[str, dict[str, Any]] = {
    "tasks/get": {"taskId": "task-1"},
    "tasks/result": {"taskId": "task-1"},
    "tasks/list": {"cursor": "x"},
    "tasks/cancel": {"taskId": "task-1"},
}
MODERN_ONLY: dict[str, dict[str, Any]] = {
    "server/discover": {},
    "subscriptions/listen": {
        "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]}
    },
}


def defined_requests(version: str) -> dict[str, dict[str, Any]]:
    requests = dict(COMMON_REQUESTS)
    if version != MODERN:
        requests.update(LEGACY_REQUESTS)
    if version == "2025-11-25":
        requests.update(TASK_REQUESTS)
    if version == MODERN:
        requests.update(MODERN_ONLY)
        requests["tasks/get"] = {"taskId": "task-1"}
        requests["tasks/cancel"] = {"taskId": "task-1"}
    return requests


def defined_notifications(version: str) -> dict[str, dict[str, Any]]:
    if version == MODERN:
        return {"notifications/cancelled": {"requestId": 3}}
    return dict(LEGACY_NOTIFICATIONS)


def undefined_requests(version: str) -> dict[str, dict[str, Any]]:
    every = {
        **COMMON_REQUESTS,
        **LEGACY_REQUESTS,
        **TASK_REQUESTS,
        **MODERN_ONLY,
        "initialize": initialize_params("2025-03-26"),
    }
    defined = set(defined_requests(version))
    if version != MODERN:
        defined.add("initialize")
    return {m: p for m, p in every.items() if m not in defined}


def initialize_params(version: str) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {"roots": {"listChanged": True}, "sampling": {}},
        "clientInfo": {"name": "c", "version": "1"},
    }


REQUEST_CASES = [(v, m) for v in VERSIONS for m in defined_requests(v)]
NOTIFICATION_CASES = [(v, m) for v in VERSIONS for m in defined_notifications(v)]
UNDEFINED_CASES = [(v, m) for v in VERSIONS for m in undefined_requests(v)]


# ---------------------------------------------------------------- requests


@pytest.mark.parametrize(("version", "method"), REQUEST_CASES, ids=lambda x: str(x))
def test_every_defined_request_decodes(version: str, method: str) -> None:
    params = defined_requests(version)[method]
    call = call_of(version, message(version, method, params, id_="req-7"))
    assert call.id == "req-7"
    assert call.method == method
    assert call.operation is Operation(method)
    # Params arrive without plumbing: no _meta, everything else as sent.
    assert call.params == params
    assert "_meta" not in call.params
    assert call.meta == {}
    assert call.progress_token is None
    assert call.client.protocol_version == version
    if version == MODERN:
        assert call.client.capabilities == CLIENT_CAPS
        assert call.client.info == CLIENT_INFO
    else:
        assert call.client.capabilities == SESSION_CAPS
        assert call.client.log_level == "info"


@pytest.mark.parametrize(("version", "method"), NOTIFICATION_CASES, ids=lambda x: str(x))
def test_every_defined_notification_decodes(version: str, method: str) -> None:
    params = defined_notifications(version)[method]
    call = call_of(version, message(version, method, params, notification=True))
    assert call.id is None
    assert call.id is None
    assert call.operation is Operation(method)
    assert call.params == params


@pytest.mark.parametrize("version", LEGACY)
def test_initialize_carries_its_own_client_context(version: str) -> None:
    params = initialize_params(version)
    call = call_of(version, message(version, "initialize", params))
    assert call.operation is Operation.INITIALIZE
    assert call.params == params
    assert call.client.protocol_version == version
    expected = dict(params["capabilities"])
    if SET.by_version[version].asks_in_arguments:
        # Form elicitation reaches these clients through tool arguments.
        expected.setdefault("elicitation", {"form": {}})
    assert call.client.capabilities == expected
    assert call.client.info == params["clientInfo"]


@pytest.mark.parametrize("version", LEGACY)
def test_without_a_session_the_context_is_empty(version: str) -> None:
    item = decode_one(version, message(version, "tools/list"), with_session=False)
    assert isinstance(item, Call)
    assert item.client.protocol_version == version
    carried = {"elicitation": {"form": {}}} if SET.by_version[version].asks_in_arguments else {}
    assert item.client.capabilities == carried
    assert item.client.info is None


@pytest.mark.parametrize(("version", "method"), UNDEFINED_CASES, ids=lambda x: str(x))
def test_methods_a_revision_lacks_are_unknown(version: str, method: str) -> None:
    params = undefined_requests(version)[method]
    failure = failure_of(version, message(version, method, params, id_=42))
    assert failure.id == 42
    assert failure.failure.kind is FailureKind.UNKNOWN_METHOD
    assert failure.method == method


@pytest.mark.parametrize(
    ("version", "method"),
    [
        (MODERN, "initialize"),
        (MODERN, "ping"),
        (MODERN, "logging/setLevel"),
        (MODERN, "resources/subscribe"),
        (MODERN, "resources/unsubscribe"),
        (MODERN, "tasks/result"),
        (MODERN, "tasks/list"),
        ("2025-11-25", "server/discover"),
        ("2025-11-25", "subscriptions/listen"),
        ("2025-11-25", "tasks/update"),
        ("2025-06-18", "tasks/get"),
        ("2024-11-05", "server/discover"),
    ],
    ids=lambda x: str(x),
)
def test_named_unknown_methods_keep_the_id(version: str, method: str) -> None:
    failure = failure_of(version, message(version, method, {}, id_="keep-me"))
    assert failure.id == "keep-me"
    assert failure.failure.kind is FailureKind.UNKNOWN_METHOD


@pytest.mark.parametrize(
    "method",
    ["notifications/initialized", "notifications/progress", "notifications/roots/list_changed"],
)
def test_legacy_client_notifications_are_unknown_on_2026(method: str) -> None:
    params = LEGACY_NOTIFICATIONS[method]
    failure = failure_of(MODERN, message(MODERN, method, params, notification=True))
    assert failure.id is None
    assert failure.failure.kind is FailureKind.UNKNOWN_METHOD


@pytest.mark.parametrize("version", VERSIONS)
def test_vendor_methods_are_forwarded_as_other(version: str) -> None:
    params = {"anything": [1, 2], "nested": {"x": None}}
    call = call_of(version, message(version, "acme/frobnicate", params, id_=5))
    assert call.operation is Operation.OTHER
    assert call.method == "acme/frobnicate"
    assert call.params == params
    assert call.id == 5


@pytest.mark.parametrize("version", LEGACY)
def test_vendor_notifications_are_forwarded_as_other(version: str) -> None:
    call = call_of(
        version, message(version, "notifications/acme/poke", {"n": 1}, notification=True)
    )
    assert call.operation is Operation.OTHER
    assert call.id is None
    assert call.params == {"n": 1}


@pytest.mark.parametrize("version", LEGACY)
def test_2025_11_25_task_status_notification_is_other(version: str) -> None:
    # notifications/tasks/status is a client notification on 2025-11-25 only; it has no
    # Operation of its own and is forwarded as it is.
    body = message(version, "notifications/tasks/status", {"taskId": "t"}, notification=True)
    call = call_of(version, body)
    assert call.operation is Operation.OTHER


# ------------------------------------------------------------ invalid params

INVALID_PARAMS: list[tuple[str, dict[str, Any]]] = [
    ("tools/call", {}),
    ("tools/call", {"name": 7}),
    ("tools/call", {"name": "x", "arguments": [1]}),
    ("tools/list", {"cursor": 5}),
    ("resources/read", {}),
    ("resources/read", {"uri": ["a"]}),
    ("prompts/get", {"name": "p", "arguments": {"a": 1}}),
    ("prompts/get", {}),
    (
        "completion/complete",
        {"ref": {"type": "ref/other"}, "argument": {"name": "a", "value": "b"}},
    ),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "p"}}),
]
LEGACY_INVALID_PARAMS: list[tuple[str, dict[str, Any]]] = [
    ("initialize", {"protocolVersion": "2025-03-26", "capabilities": {}}),
    ("initialize", {"protocolVersion": 1, "capabilities": {}, "clientInfo": CLIENT_INFO}),
    ("logging/setLevel", {"level": "loud"}),
    ("resources/subscribe", {}),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("method", "params"), INVALID_PARAMS, ids=lambda x: str(x)[:30])
def test_invalid_params_keep_the_id(version: str, method: str, params: dict[str, Any]) -> None:
    failure = failure_of(version, message(version, method, params, id_=99))
    assert failure.id == 99
    assert failure.failure.kind is FailureKind.INVALID_PARAMS
    assert failure.method == method


@pytest.mark.parametrize("version", LEGACY)
@pytest.mark.parametrize(("method", "params"), LEGACY_INVALID_PARAMS, ids=lambda x: str(x)[:30])
def test_legacy_invalid_params(version: str, method: str, params: dict[str, Any]) -> None:
    failure = failure_of(version, message(version, method, params, id_="i"))
    assert failure.id == "i"
    assert failure.failure.kind is FailureKind.INVALID_PARAMS


@pytest.mark.parametrize("version", VERSIONS)
def test_meta_that_is_not_an_object_is_invalid_params(version: str) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": [1]}}
    failure = failure_of(version, body)
    assert failure.id == 3
    assert failure.failure.kind is FailureKind.INVALID_PARAMS


@pytest.mark.parametrize("version", VERSIONS)
def test_a_notification_with_an_id_or_a_request_without_one(version: str) -> None:
    note = "notifications/cancelled"
    with_id = message(version, note, {"requestId": 1}, id_=8, notification=False)
    failure = failure_of(version, with_id)
    assert failure.id == 8
    assert failure.failure.kind is FailureKind.INVALID_REQUEST
    without = message(version, "tools/list", {}, notification=True)
    failure = failure_of(version, without)
    assert failure.id is None
    assert failure.failure.kind is FailureKind.INVALID_REQUEST


# ------------------------------------------------------------- 2026 _meta


def test_2026_missing_meta_is_invalid_params() -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    failure = failure_of(MODERN, body)
    assert failure.id == 1
    assert failure.failure.kind is FailureKind.INVALID_PARAMS
    no_params = {"jsonrpc": "2.0", "id": 2, "method": "server/discover"}
    failure = failure_of(MODERN, no_params)
    assert failure.id == 2
    assert failure.failure.kind is FailureKind.INVALID_PARAMS


@pytest.mark.parametrize("missing", [PV, CAPS])
def test_2026_missing_required_meta_keys_are_invalid_params(missing: str) -> None:
    meta = modern_meta()
    del meta[missing]
    body = {"jsonrpc": "2.0", "id": "m", "method": "tools/call", "params": {"name": "t"}}
    body["params"]["_meta"] = meta
    failure = failure_of(MODERN, body)
    assert failure.id == "m"
    assert failure.failure.kind is FailureKind.INVALID_PARAMS
    assert missing in failure.failure.message


def test_2026_client_capabilities_must_be_an_object() -> None:
    body = message(MODERN, "tools/list", meta={CAPS: ["roots"]})
    assert failure_of(MODERN, body).failure.kind is FailureKind.INVALID_PARAMS


def test_2026_client_info_is_optional() -> None:
    body = message(MODERN, "tools/list")
    del body["params"]["_meta"][INFO]
    call = call_of(MODERN, body)
    assert call.client.info is None


def test_2026_other_protocol_version_in_meta_is_unsupported() -> None:
    body = message(MODERN, "tools/list", meta={PV: "2025-06-18"})
    failure = failure_of(MODERN, body)
    assert failure.failure.kind is FailureKind.UNSUPPORTED_VERSION
    assert failure.failure.data["requested"] == "2025-06-18"
    assert MODERN in failure.failure.data["supported"]
    assert failure.failure.message == "Unsupported protocol version: 2025-06-18"


def test_2026_log_level_is_lifted_and_checked() -> None:
    call = call_of(MODERN, message(MODERN, "tools/list", meta={LEVEL: "debug"}))
    assert call.client.log_level == "debug"
    assert call.meta == {}
    failure = failure_of(MODERN, message(MODERN, "tools/list", meta={LEVEL: "chatty"}))
    assert failure.failure.kind is FailureKind.INVALID_PARAMS
    assert failure.failure.message == "unknown log level: 'chatty'"


def test_2026_protocol_meta_keys_do_not_leak_into_meta() -> None:
    extra = {"traceparent": "00-abc-def-01", "com.acme/tenant": "t1", "progressToken": "p"}
    call = call_of(MODERN, message(MODERN, "tools/call", {"name": "x"}, meta=extra))
    assert call.meta == {"traceparent": "00-abc-def-01", "com.acme/tenant": "t1"}
    assert call.progress_token == "p"


def test_2026_notifications_need_no_meta() -> None:
    body = message(MODERN, "notifications/cancelled", {"requestId": "r"}, notification=True)
    call = call_of(MODERN, body)
    assert call.operation is Operation.CANCELLED
    assert call.client.protocol_version == MODERN


def test_2026_notification_with_malformed_protocol_meta_does_not_crash() -> None:
    # Notifications are not checked for the request keys; a junk clientCapabilities
    # value must not break the context.
    body = message(
        MODERN,
        "notifications/cancelled",
        {"requestId": "r"},
        notification=True,
        meta={CAPS: "junk", LEVEL: 5},
    )
    item = decode_one(MODERN, body)
    assert isinstance(item, Call)
    assert item.client.capabilities == {}


# ---------------------------------------------------- _meta pass-through


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("method", ["tools/call", "resources/read", "tools/list"])
def test_meta_passes_through(version: str, method: str) -> None:
    meta = {
        "progressToken": 17,
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "tracestate": "acme=1",
        "com.example/vendor": {"deep": [1, {"x": True}]},
    }
    params = dict(COMMON_REQUESTS[method])
    call = call_of(version, message(version, method, params, meta=meta))
    assert call.progress_token == 17
    assert call.meta == {k: v for k, v in meta.items() if k != "progressToken"}
    assert call.params == params


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("token", ["tok", 0, -5])
def test_progress_tokens(version: str, token: Any) -> None:
    call = call_of(version, message(version, "tools/list", meta={"progressToken": token}))
    assert call.progress_token == token


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("token", [True, 1.5, None, [1]])
def test_invalid_progress_tokens_are_ignored(version: str, token: Any) -> None:
    call = call_of(version, message(version, "tools/list", meta={"progressToken": token}))
    assert call.progress_token is None
    assert "progressToken" not in call.meta


# ------------------------------------------------- inputResponses / state

ANSWERS = {"k1": {"action": "accept", "content": {"name": "Ada"}}, "k2": {"roots": []}}


@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "resources/read"])
def test_2026_input_responses_are_lifted(method: str) -> None:
    params = {**COMMON_REQUESTS[method], "inputResponses": ANSWERS, "requestState": "opaque=="}
    call = call_of(MODERN, message(MODERN, method, params))
    assert call.params == COMMON_REQUESTS[method]
    assert call.state == "opaque=="
    assert call.answers is not None
    assert set(call.answers) == {"k1", "k2"}
    assert call.answers["k1"].result == ANSWERS["k1"]
    assert call.answers["k2"].result == {"roots": []}
    assert call.answers["k1"].error is None


def test_2026_state_alone_is_lifted() -> None:
    params = {"name": "t", "requestState": "s"}
    call = call_of(MODERN, message(MODERN, "tools/call", params))
    assert call.state == "s"
    assert call.answers is None
    assert call.params == {"name": "t"}


@pytest.mark.parametrize("method", ["tools/list", "completion/complete", "prompts/list"])
def test_2026_input_responses_elsewhere_are_dropped(method: str) -> None:
    params = {**COMMON_REQUESTS[method], "inputResponses": ANSWERS, "requestState": "s"}
    call = call_of(MODERN, message(MODERN, method, params))
    assert call.answers is None
    assert call.state is None
    assert call.params == COMMON_REQUESTS[method]


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_input_responses_are_plain_params(version: str) -> None:
    # No legacy revision defines them: they are unknown fields and pass through.
    params = {"name": "t", "inputResponses": ANSWERS, "requestState": "s"}
    call = call_of(version, message(version, "tools/call", params))
    assert call.answers is None
    assert call.state is None
    assert call.params == params


# --------------------------------------------------------- client replies


@pytest.mark.parametrize("version", VERSIONS)
def test_client_result_is_a_reply(version: str) -> None:
    item = decode_one(version, {"jsonrpc": "2.0", "id": "ask-1", "result": {"roots": []}})
    assert isinstance(item, ClientReply)
    assert item.id == "ask-1"
    assert item.answer.result == {"roots": []}
    assert item.answer.error is None


@pytest.mark.parametrize("version", VERSIONS)
def test_client_error_is_a_reply(version: str) -> None:
    error = {"code": -1, "message": "User rejected sampling"}
    item = decode_one(version, {"jsonrpc": "2.0", "id": 4, "error": error})
    assert isinstance(item, ClientReply)
    assert item.id == 4
    assert item.answer.error == error
    assert item.answer.result is None


@pytest.mark.parametrize("version", VERSIONS)
def test_response_with_both_or_neither_is_invalid(version: str) -> None:
    both = {"jsonrpc": "2.0", "id": 4, "result": {}, "error": {"code": 1, "message": "x"}}
    failure = failure_of(version, both)
    assert failure.id == 4
    assert failure.failure.kind is FailureKind.INVALID_REQUEST
    neither = {"jsonrpc": "2.0", "id": 5}
    failure = failure_of(version, neither)
    assert failure.id == 5
    assert failure.failure.kind is FailureKind.INVALID_REQUEST
