"""Client role, per revision: reading an upstream's responses, answers, events,
profiles and era evidence."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import (
    Answer,
    Ask,
    AskKind,
    ClientContext,
    Event,
    Failure,
    FailureKind,
    InputRequired,
    Operation,
    Value,
)
from gateway.protocol.adapter import decode_header_value, encode_header_value
from gateway.protocol.selection import AdapterSet
from tests.unit.protocol.adapter.test_client import (
    INPUT_REQUIRED_RESULT,
    LEGACY,
    MODERN,
    SERVER_INFO,
    SET,
    TOOL_CALL,
    VERSIONS,
    adapter,
)

# -------------------------------------------------------------- responses


@pytest.mark.parametrize("version", VERSIONS)
def test_read_value(version: str) -> None:
    result = {"content": [], "x": 1}
    if version == MODERN:
        result["resultType"] = "complete"
    outcome = adapter(version).client_read_response(
        TOOL_CALL, {"jsonrpc": "2.0", "id": 1, "result": result}
    )
    assert outcome == Value(result)


def test_2026_absent_result_type_is_complete() -> None:
    outcome = adapter(MODERN).client_read_response(
        TOOL_CALL, {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
    )
    assert outcome == Value({"content": []})


def test_2026_task_result_is_a_value() -> None:
    result = {"resultType": "task", "taskId": "t"}
    outcome = adapter(MODERN).client_read_response(
        TOOL_CALL, {"jsonrpc": "2.0", "id": 1, "result": result}
    )
    assert outcome == Value(result)


def test_2026_input_required_is_read() -> None:
    outcome = adapter(MODERN).client_read_response(
        TOOL_CALL, {"jsonrpc": "2.0", "id": 1, "result": INPUT_REQUIRED_RESULT}
    )
    assert isinstance(outcome, InputRequired)
    assert outcome.state == "opaque"
    assert set(outcome.asks) == {"who", "llm", "dirs"}


@pytest.mark.parametrize("kind", ["partial", "", 3, None])
def test_2026_unknown_result_type_is_a_protocol_failure(kind: Any) -> None:
    outcome = adapter(MODERN).client_read_response(
        TOOL_CALL, {"jsonrpc": "2.0", "id": 1, "result": {"resultType": kind}}
    )
    assert isinstance(outcome, Failure)
    assert outcome.kind is FailureKind.UPSTREAM_PROTOCOL


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_result_type_is_not_interpreted(version: str) -> None:
    result = {"resultType": "input_required", "content": []}
    outcome = adapter(version).client_read_response(
        TOOL_CALL, {"jsonrpc": "2.0", "id": 1, "result": result}
    )
    assert outcome == Value(result)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("result", [None, [1], "x", 3])
def test_missing_result_is_a_protocol_failure(version: str, result: Any) -> None:
    outcome = adapter(version).client_read_response(
        TOOL_CALL, {"jsonrpc": "2.0", "id": 1, "result": result}
    )
    assert isinstance(outcome, Failure)
    assert outcome.kind is FailureKind.UPSTREAM_PROTOCOL


COMMON_ERRORS = {
    -32700: FailureKind.PARSE_ERROR,
    -32600: FailureKind.INVALID_REQUEST,
    -32601: FailureKind.UNKNOWN_METHOD,
    -32602: FailureKind.INVALID_PARAMS,
    -32603: FailureKind.INTERNAL,
}
ERROR_KINDS: dict[str, dict[int, FailureKind | None]] = {
    v: {
        **COMMON_ERRORS,
        -32002: FailureKind.RESOURCE_NOT_FOUND,
        -32042: FailureKind.URL_ELICITATION_REQUIRED if v == "2025-11-25" else None,
        -32020: None,
        -32021: None,
        -32022: None,
        -32001: None,
        -32000: None,
        12345: None,
    }
    for v in LEGACY
}
ERROR_KINDS[MODERN] = {
    **COMMON_ERRORS,
    -32002: None,
    -32042: None,
    -32020: FailureKind.HEADER_MISMATCH,
    -32021: FailureKind.MISSING_CAPABILITY,
    -32022: FailureKind.UNSUPPORTED_VERSION,
    -32001: None,
    -32000: None,
    12345: None,
}
ERROR_CASES = [(v, c) for v in VERSIONS for c in ERROR_KINDS[v]]


@pytest.mark.parametrize(("version", "code"), ERROR_CASES, ids=lambda x: str(x))
def test_read_errors(version: str, code: int) -> None:
    error = {"code": code, "message": "m", "data": {"d": 1}}
    outcome = adapter(version).client_read_response(
        TOOL_CALL, {"jsonrpc": "2.0", "id": 1, "error": error}
    )
    assert isinstance(outcome, Failure)
    assert outcome.message == "m"
    assert outcome.data == {"d": 1}
    kind = ERROR_KINDS[version][code]
    if kind is None:
        assert outcome.kind is FailureKind.UPSTREAM_ERROR
        assert outcome.code == code
    else:
        assert outcome.kind is kind
        assert outcome.code is None


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("error", [None, "boom", {"message": "no code"}, {"code": "1"}])
def test_read_malformed_errors(version: str, error: Any) -> None:
    outcome = adapter(version).client_read_response(
        TOOL_CALL, {"jsonrpc": "2.0", "id": 1, "error": error}
    )
    assert isinstance(outcome, Failure)
    assert outcome.kind is FailureKind.UPSTREAM_PROTOCOL


@pytest.mark.parametrize("source", VERSIONS)
@pytest.mark.parametrize("target", VERSIONS)
def test_upstream_errors_reencode_for_every_client(source: str, target: str) -> None:
    """An upstream error read by one revision, encoded for another, keeps its meaning."""
    for code in (-32002, -32601, -32000):
        failure = adapter(source).client_read_failure({"code": code, "message": "m"})
        encoded = adapter(target).encode_failure(1, failure, Operation.RESOURCES_READ)
        expected = code
        if code == -32002 and target == MODERN:
            expected = -32602
        assert encoded["error"]["code"] == expected, (source, target, code)


# ------------------------------------------------------------ answers, events


@pytest.mark.parametrize("version", VERSIONS)
def test_client_answer(version: str) -> None:
    a = adapter(version)
    assert a.client_answer(5, Answer(result={"roots": []})) == {
        "jsonrpc": "2.0",
        "id": 5,
        "result": {"roots": []},
    }
    assert a.client_answer("x", Answer(error={"code": -1, "message": "no"})) == {
        "jsonrpc": "2.0",
        "id": "x",
        "error": {"code": -1, "message": "no"},
    }
    assert a.client_answer(6, Answer()) == {"jsonrpc": "2.0", "id": 6, "result": {}}


@pytest.mark.parametrize("version", VERSIONS)
def test_client_read_event(version: str) -> None:
    a = adapter(version)
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    assert a.client_read_event(note) == Event("notifications/progress", {"progress": 1})
    assert a.client_read_event({"jsonrpc": "2.0", "method": "n", "params": [1]}) == Event("n", {})
    assert a.client_read_event({"jsonrpc": "2.0", "id": 1, "method": "ping"}) is None


# ---------------------------------------------------------------- profiles


@pytest.mark.parametrize("version", LEGACY)
def test_read_profile_from_initialize(version: str) -> None:
    result = {
        "protocolVersion": version,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "up", "version": "3"},
        "instructions": "hi",
    }
    profile = adapter(version).client_read_profile(result)
    assert profile.info == {"name": "up", "version": "3"}
    assert profile.capabilities == {"tools": {}}
    assert profile.instructions == "hi"
    assert profile.versions == (version,)
    assert profile.version == version
    expected = {"sampling/createMessage", "roots/list"}
    if version >= "2025-06-18":
        expected.add("elicitation/create")
    assert set(profile.ask_kinds) == expected


@pytest.mark.parametrize("version", LEGACY)
def test_read_profile_from_a_bare_initialize(version: str) -> None:
    profile = adapter(version).client_read_profile({})
    assert profile.info == {"name": "upstream", "version": "0"}
    assert profile.capabilities == {}
    assert profile.versions == (version,)


def test_read_profile_from_discover() -> None:
    result = {
        "resultType": "complete",
        "supportedVersions": ["2025-11-25", MODERN, 7],
        "capabilities": {"tools": {"listChanged": True}, "extensions": {}},
        "instructions": "hi",
        "ttlMs": 1000,
        "cacheScope": "public",
        "_meta": {SERVER_INFO: {"name": "modern-up", "version": "9"}},
    }
    profile = adapter(MODERN).client_read_profile(result)
    assert profile.info == {"name": "modern-up", "version": "9"}
    assert profile.capabilities == {"tools": {"listChanged": True}, "extensions": {}}
    assert profile.instructions == "hi"
    assert profile.versions == (MODERN, "2025-11-25")
    assert set(profile.ask_kinds) == {k.value for k in AskKind}


def test_read_profile_from_a_bare_discover() -> None:
    profile = adapter(MODERN).client_read_profile({"resultType": "complete"})
    assert profile.info == {"name": "upstream", "version": "0"}
    assert profile.versions == (MODERN,)


# ------------------------------------------------------- era evidence in a probe


@pytest.mark.parametrize("code", [-32020, -32021, -32022])
def test_modern_refusals_are_era_evidence_only_for_the_modern_revision(code: int) -> None:
    error = {"code": code, "message": "no"}
    assert SET.by_version[MODERN].client_is_modern_refusal(error)
    for version in LEGACY:
        assert not SET.by_version[version].client_is_modern_refusal(error)


@pytest.mark.parametrize("error", [None, "x", {}, {"code": -32600}, {"code": -32602}])
def test_other_errors_say_nothing_about_the_era(error: Any) -> None:
    assert not SET.by_version[MODERN].client_is_modern_refusal(error)


def test_the_era_codes_are_the_revision_own_codes() -> None:
    modern = SET.by_version[MODERN]
    own = {
        modern.codes[kind]
        for kind in (
            FailureKind.HEADER_MISMATCH,
            FailureKind.MISSING_CAPABILITY,
            FailureKind.UNSUPPORTED_VERSION,
        )
    }
    assert modern.era_refusal_codes == own


def test_an_unsupported_version_refusal_offers_versions() -> None:
    modern = SET.by_version[MODERN]
    error = {"code": -32022, "message": "no", "data": {"supported": ["2099-01-01", 3]}}
    assert modern.client_offered_versions(error) == ["2099-01-01"]
    assert modern.client_offered_versions({"code": -32021, "data": {"supported": ["x"]}}) == []
    assert modern.client_offered_versions({"code": -32022}) == []
    assert SET.by_version["2025-11-25"].client_offered_versions(error) == []


# ------------------------------------------------- what the mutation run asked for


@pytest.mark.parametrize("version", VERSIONS)
def test_client_answer_passes_an_error_on_whole_and_fills_what_is_missing(version: str) -> None:
    a = adapter(version)
    rejected = {"code": -1, "message": "User rejected sampling request", "data": {"why": "no"}}
    assert a.client_answer(1, Answer(error=rejected))["error"] == rejected
    # An error object without code or message still makes a valid JSON-RPC error.
    assert a.client_answer(2, Answer(error={}))["error"] == {"code": -32603, "message": ""}


@pytest.mark.parametrize("version", LEGACY)
def test_the_profile_holds_the_revision_the_server_chose(version: str) -> None:
    chosen = "2024-11-05" if version != "2024-11-05" else "2025-03-26"
    assert adapter(version).client_read_profile({"protocolVersion": chosen}).versions == (chosen,)


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_a_session_request_without_a_call_names_the_revision(version: str) -> None:
    """From 2025-06-18 every request after initialize carries MCP-Protocol-Version
    (a notification or a DELETE has no Call)."""
    headers = adapter(version).client_headers(None, "sid")
    assert headers["MCP-Protocol-Version"] == version
    assert headers["Mcp-Session-Id"] == "sid"


@pytest.mark.parametrize("version", LEGACY)
def test_a_lost_session_is_named_by_code_and_message_together(version: str) -> None:
    a = adapter(version)
    lost = {"code": -32000, "message": "Bad Request: No valid session ID provided"}
    assert a.client_names_lost_session({"error": lost})
    assert a.client_names_lost_session({"error": {"code": -32001, "message": "Session gone"}})
    assert not a.client_names_lost_session({"error": {"code": -32000, "message": "busy"}})
    assert not a.client_names_lost_session({"error": {"code": -32002, "message": "session"}})
    assert not a.client_names_lost_session({"error": {"code": 32001, "message": "session"}})
    assert not a.client_names_lost_session({"error": {"code": -32001}})
    assert not a.client_names_lost_session({"error": "session"})
    assert not a.client_names_lost_session("session")


@pytest.mark.parametrize("version", VERSIONS)
def test_an_upstream_error_without_a_message_has_an_empty_one(version: str) -> None:
    failure = adapter(version).client_read_failure({"code": 12345})
    assert failure.kind is FailureKind.UPSTREAM_ERROR and failure.message == ""
    malformed = adapter(version).client_read_failure({"message": "no code"})
    assert malformed.message == "the upstream sent a malformed error"
    missing = adapter(version).client_read_response(TOOL_CALL, {"id": 1, "result": 5})
    assert isinstance(missing, Failure)
    assert missing.message == "the upstream answered without a result"


def test_only_the_modern_revision_reads_offered_versions() -> None:
    """A handshake-era server's -32602 to initialize may list versions too: it is not
    the modern refusal, so nothing is offered."""
    error = {"code": -32602, "message": "Unsupported", "data": {"supported": ["2025-06-18"]}}
    for version in LEGACY:
        assert adapter(version).client_offered_versions(error) == []
    assert adapter(MODERN).client_offered_versions(None) == []


@pytest.mark.parametrize("version", LEGACY)
def test_a_server_request_with_params_that_are_no_object_asks_with_none(version: str) -> None:
    message = {"jsonrpc": "2.0", "id": 3, "method": "roots/list", "params": None}
    assert adapter(version).client_input_requests(message) == {"3": Ask(AskKind.LIST_ROOTS, {})}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_revision_declares_elicitation_exactly_when_it_can_ask_it(version: str) -> None:
    a = adapter(version)
    projected = a.client_project_capabilities({"elicitation": {"form": {}}, "roots": {}})
    assert ("elicitation" in projected) is (AskKind.ELICIT in a.ask_kinds)
    assert projected["roots"] == {}


def test_only_a_value_both_opened_and_closed_by_the_sentinel_is_wrapped() -> None:
    """The spec: a plain value that starts with `=?base64?` and ends with `?=` is
    encoded; one that only ends (or only starts) like it is plain."""
    for plain in ("a?=", "=?base64?a"):
        assert encode_header_value(plain) == plain
        assert decode_header_value(plain) == plain
    wrapped = encode_header_value("=?base64?a?=")
    assert wrapped != "=?base64?a?=" and decode_header_value(wrapped) == "=?base64?a?="


def test_an_adapter_names_its_class_and_revision() -> None:
    assert repr(adapter("2025-06-18")) == "<Adapter2025_06_18 2025-06-18>"


def test_client_outgoing_is_the_request_and_its_headers_in_one_step() -> None:
    from gateway.core import Operation
    from gateway.core.call import Call
    from gateway.protocol.selection import AdapterSet

    for each in AdapterSet.default().adapters:
        client = ClientContext(protocol_version=each.version)
        call = Call(7, Operation.TOOLS_CALL, "tools/call", {"name": "echo"}, client)
        message, headers = each.client_outgoing(call, 41, "sid")
        assert message == each.client_request(call, 41)
        assert headers == each.client_headers(call, "sid")


def test_each_era_reads_a_created_task_in_its_own_shape() -> None:

    by_version = AdapterSet.default().by_version
    core = by_version["2025-11-25"].client_read_created_task(
        {"task": {"taskId": "t1", "status": "working"}}
    )
    assert core is not None and core.id == "t1" and core.status == "working"
    modern = by_version["2026-07-28"]
    extension = modern.client_read_created_task(
        {"resultType": "task", "taskId": "t2", "status": "working"}
    )
    assert extension is not None and extension.id == "t2"
    assert modern.client_read_created_task({"resultType": "complete", "content": []}) is None
