"""AdapterSet: which revision an inbound message speaks; check_http per revision."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import ClientContext, Failure, FailureKind, Preamble, SessionView
from gateway.protocol.adapter import Adapter, adapter_of, encode_header_value
from gateway.protocol.selection import AdapterSet
from gateway.protocol.v2026_07_28 import Adapter2026_07_28

SET = AdapterSet.default()
VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
LEGACY = VERSIONS[:4]
MODERN = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
JSON = "application/json"
ACCEPT = "application/json, text/event-stream"


def request(
    method: str = "tools/list",
    params: dict[str, Any] | None = None,
    *,
    version: str | None = None,
    id_: Any = 1,
) -> dict[str, Any]:
    params = dict(params or {})
    if version is not None:
        params["_meta"] = {PV: version, CAPS: {}}
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        body["id"] = id_
    return body


def select(body: Any, headers: dict[str, str] | None = None, session: str | None = None) -> Any:
    view = SessionView(id="s", protocol_version=session) if session else None
    return SET.select(Preamble(body=body, headers=headers or {}, session=view))


def version_of(selected: Adapter | Failure) -> str:
    assert isinstance(selected, Adapter), selected
    return selected.version


# ----------------------------------------------------------------- select


def test_default_set() -> None:
    assert SET.versions == sorted(VERSIONS, reverse=True)
    assert [a.version for a in SET.stateless] == [MODERN]
    assert [a.version for a in SET.handshake] == sorted(LEGACY, reverse=True)


def test_per_request_meta() -> None:
    assert version_of(select(request(version=MODERN))) == MODERN
    headers = {"mcp-protocol-version": MODERN}
    assert version_of(select(request(version=MODERN), headers)) == MODERN


def test_per_request_meta_wins_over_header_and_session() -> None:
    headers = {"mcp-protocol-version": "2025-06-18"}
    selected = select(request(version=MODERN), headers, session="2025-06-18")
    assert version_of(selected) == MODERN


@pytest.mark.parametrize("requested", ["2099-01-01", "2025-06-18", "2024-11-05", "junk"])
def test_unknown_modern_version(requested: str) -> None:
    selected = select(request(version=requested))
    assert isinstance(selected, Failure)
    assert selected.kind is FailureKind.UNSUPPORTED_VERSION
    assert selected.data["supported"] == [MODERN]
    assert selected.data["requested"] == requested
    encoded = SET.by_version[MODERN].encode_failure(1, selected)
    assert encoded["error"]["code"] == -32022
    assert encoded["error"]["data"] == {"supported": [MODERN], "requested": requested}
    assert SET.by_version[MODERN].http_status(selected) == 400


@pytest.mark.parametrize("version", VERSIONS)
def test_header_only(version: str) -> None:
    selected = select(request(), {"mcp-protocol-version": version})
    assert version_of(selected) == version


def test_unknown_header_without_session() -> None:
    selected = select(request(), {"mcp-protocol-version": "2099-01-01"})
    assert isinstance(selected, Failure)
    assert selected.kind is FailureKind.UNSUPPORTED_VERSION
    assert selected.data["supported"] == [MODERN]
    # The spec's wording, and what was asked for.
    assert selected.message == "Unsupported protocol version: 2099-01-01"
    assert selected.data["requested"] == "2099-01-01"


def test_unknown_header_with_session() -> None:
    selected = select(request(), {"mcp-protocol-version": "1999-01-01"}, session="2025-06-18")
    assert isinstance(selected, Failure)
    assert selected.kind is FailureKind.UNSUPPORTED_VERSION
    assert selected.data["supported"] == SET.versions


def test_legacy_header_defers_to_the_session() -> None:
    # A handshake revision's header names the session's version; the session decides.
    selected = select(request(), {"mcp-protocol-version": "2025-06-18"}, session="2025-11-25")
    assert version_of(selected) == "2025-11-25"


def initialize(version: Any) -> dict[str, Any]:
    return request(
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        },
    )


@pytest.mark.parametrize("version", LEGACY)
def test_initialize_known_version(version: str) -> None:
    assert version_of(select(initialize(version))) == version


@pytest.mark.parametrize("requested", ["2099-01-01", MODERN, "1.0", 5, None, ["2025-06-18"]])
def test_initialize_unknown_version_gets_the_newest_handshake(requested: Any) -> None:
    assert version_of(select(initialize(requested))) == "2025-11-25"


def test_initialize_with_a_legacy_header() -> None:
    selected = select(initialize("2025-03-26"), {"mcp-protocol-version": "2025-06-18"})
    assert version_of(selected) == "2025-03-26"


@pytest.mark.parametrize("version", LEGACY)
def test_session(version: str) -> None:
    assert version_of(select(request(), session=version)) == version


def test_session_with_an_unknown_version_falls_back() -> None:
    assert version_of(select(request(), session="1999-01-01")) == "2025-03-26"


@pytest.mark.parametrize(
    "body", [request(), request(id_=None), {"jsonrpc": "2.0", "id": 1, "result": {}}, [], 5, None]
)
def test_nothing_selects_the_default_legacy(body: Any) -> None:
    # The newest revision that needs no MCP-Protocol-Version header.
    assert version_of(select(body)) == "2025-03-26"
    assert SET.default_legacy.version == "2025-03-26"
    assert not SET.default_legacy.version_header


def test_batch_uses_its_first_message() -> None:
    assert version_of(select([request(version=MODERN), request()])) == MODERN
    assert version_of(select([initialize("2024-11-05")])) == "2024-11-05"


def test_only() -> None:
    legacy = SET.only(["2024-11-05", "2025-06-18"])
    assert legacy.versions == ["2025-06-18", "2024-11-05"]
    assert legacy.default_legacy.version == "2024-11-05"
    selected = legacy.select(Preamble(body=request(version=MODERN)))
    assert isinstance(selected, Failure)
    assert selected.kind is FailureKind.UNSUPPORTED_VERSION
    # No stateless revision left: the data lists every revision the set speaks.
    assert selected.data["supported"] == ["2025-06-18", "2024-11-05"]
    init = legacy.select(Preamble(body=initialize("2025-11-25")))
    assert version_of(init) == "2025-06-18"
    modern = SET.only([MODERN])
    assert modern.default_legacy.version == MODERN
    assert version_of(modern.select(Preamble(body=initialize("2025-06-18")))) == MODERN
    with pytest.raises(ValueError, match="2099"):
        SET.only(["2099-01-01"])
    with pytest.raises(ValueError):
        SET.only([])
    with pytest.raises(ValueError):
        AdapterSet([])


class _Renamed(Adapter2026_07_28):
    """A throwaway revision that names itself under a key of its own."""

    version = "2099-02-02"

    @classmethod
    def named_version(cls, message: dict[str, Any]) -> str | None:
        params = message.get("params")
        named = params.get("x/revision") if isinstance(params, dict) else None
        return named if isinstance(named, str) else None


def test_adapters_declare_how_their_messages_are_recognised() -> None:
    adapters = SET.with_adapter(_Renamed())
    body = request(params={"x/revision": "2099-02-02"})
    assert isinstance(adapters.select(Preamble(body=body)), _Renamed)
    assert adapters.named_version(request(version=MODERN)) == MODERN
    # Without it, the key means nothing: the legacy default answers.
    assert version_of(SET.select(Preamble(body=body))) == SET.default_legacy.version
    # A set without the modern revision still knows a modern message when it sees one.
    legacy = SET.only(LEGACY)
    assert legacy.named_version(request(version=MODERN)) == MODERN


def test_with_adapter_replaces_or_adds() -> None:
    replacement = type(SET.by_version["2025-06-18"])()
    replaced = SET.with_adapter(replacement)
    assert replaced.versions == SET.versions
    assert replaced.by_version["2025-06-18"] is replacement
    assert SET.by_version["2025-06-18"] is not replacement  # the original is untouched
    smaller = SET.only(["2025-06-18"]).with_adapter(SET.by_version[MODERN])
    assert smaller.versions == [MODERN, "2025-06-18"]


# -------------------------------------------------------------- check_http


def http(
    body: Any,
    headers: dict[str, str],
    *,
    method: str = "POST",
    transport: str = "http",
) -> Preamble:
    preamble = Preamble(body=body, headers=headers, http_method=method, transport=transport)
    # As selection leaves it: the revision the body names for itself, read once.
    preamble.named_version = SET.named_version(body) if isinstance(body, dict) else None
    return preamble


def modern_headers(method: str = "tools/list", name: str | None = None) -> dict[str, str]:
    headers = {
        "content-type": JSON,
        "accept": ACCEPT,
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    return headers


@pytest.mark.parametrize("version", VERSIONS)
def test_check_http_content_type(version: str) -> None:
    adapter = SET.by_version[version]
    body = request(version=MODERN if version == MODERN else None)
    headers = modern_headers()
    assert adapter.check_http(http(body, headers)) is None
    charset = {**headers, "content-type": "Application/JSON; charset=utf-8"}
    assert adapter.check_http(http(body, charset)) is None
    for bad in ("text/plain", "", None):
        broken = dict(headers)
        if bad is None:
            del broken["content-type"]
        else:
            broken["content-type"] = bad
        failure = adapter.check_http(http(body, broken))
        assert isinstance(failure, Failure)
        assert failure.kind is FailureKind.UNSUPPORTED_MEDIA_TYPE
        assert adapter.http_status(failure) == 415


@pytest.mark.parametrize("version", VERSIONS)
def test_check_http_accept(version: str) -> None:
    adapter = SET.by_version[version]
    body = request(version=MODERN if version == MODERN else None)
    for accept in (ACCEPT, "text/event-stream, application/json;q=0.9", "*/*"):
        assert adapter.check_http(http(body, {**modern_headers(), "accept": accept})) is None
    for accept in ("application/json", "text/event-stream", "", None):
        headers = modern_headers()
        if accept is None:
            del headers["accept"]
        else:
            headers["accept"] = accept
        failure = adapter.check_http(http(body, headers))
        assert isinstance(failure, Failure)
        assert failure.kind is FailureKind.NOT_ACCEPTABLE
        assert adapter.http_status(failure) == 406
        # The HTTP+SSE message endpoint and stdio have no Accept rule.
        assert adapter.check_http(http(body, headers, transport="sse")) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_check_http_only_posts(version: str) -> None:
    adapter = SET.by_version[version]
    assert adapter.check_http(http(None, {}, method="GET")) is None
    assert adapter.check_http(http(None, {}, method="DELETE")) is None


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_needs_no_mcp_headers(version: str) -> None:
    adapter = SET.by_version[version]
    headers = {"content-type": JSON, "accept": ACCEPT}
    assert adapter.check_http(http(request("tools/call", {"name": "x"}), headers)) is None


def mismatch(body: Any, headers: dict[str, str]) -> None:
    adapter = SET.by_version[MODERN]
    failure = adapter.check_http(http(body, headers))
    assert isinstance(failure, Failure), headers
    assert failure.kind is FailureKind.HEADER_MISMATCH
    assert adapter.http_status(failure) == 400
    assert adapter.encode_failure(1, failure)["error"]["code"] == -32020


def test_2026_protocol_version_header() -> None:
    body = request(version=MODERN)
    headers = modern_headers()
    del headers["mcp-protocol-version"]
    mismatch(body, headers)
    mismatch(body, {**modern_headers(), "mcp-protocol-version": "2025-06-18"})
    # Without _meta the header still has to be there; the decoder reports the body.
    assert SET.by_version[MODERN].check_http(http(request(), modern_headers())) is None


def test_2026_method_header() -> None:
    body = request(version=MODERN)
    headers = modern_headers()
    del headers["mcp-method"]
    mismatch(body, headers)
    mismatch(body, modern_headers("tools/call"))
    mismatch(body, modern_headers("Tools/List"))


@pytest.mark.parametrize(
    ("method", "field"),
    [("tools/call", "name"), ("prompts/get", "name"), ("resources/read", "uri")],
)
@pytest.mark.parametrize("value", ["plain", "café ☕", "file:///a/b.txt", " spaced "])
def test_2026_name_header(method: str, field: str, value: str) -> None:
    adapter = SET.by_version[MODERN]
    body = request(method, {field: value}, version=MODERN)
    assert (
        adapter.check_http(http(body, modern_headers(method, encode_header_value(value)))) is None
    )
    mismatch(body, modern_headers(method))
    mismatch(body, modern_headers(method, "other"))
    mismatch(body, modern_headers(method, encode_header_value(value + "x")))


def test_2026_name_header_base64_of_a_plain_value() -> None:
    # A client may wrap any value; the server decodes before comparing.
    body = request("tools/call", {"name": "add"}, version=MODERN)
    headers = modern_headers("tools/call", "=?base64?YWRk?=")
    assert SET.by_version[MODERN].check_http(http(body, headers)) is None


def test_2026_name_header_only_where_defined() -> None:
    body = request("tools/list", version=MODERN)
    headers = modern_headers("tools/list", "whatever")
    assert SET.by_version[MODERN].check_http(http(body, headers)) is None


def test_2026_notifications_are_exempt_from_method_and_name() -> None:
    adapter = SET.by_version[MODERN]
    body = request("notifications/cancelled", {"requestId": 1}, id_=None)
    headers = {"content-type": JSON, "accept": ACCEPT, "mcp-protocol-version": MODERN}
    assert adapter.check_http(http(body, headers)) is None
    del headers["mcp-protocol-version"]
    mismatch(body, headers)


@pytest.mark.parametrize("body", [None, [request(version=MODERN)], {"jsonrpc": "2.0"}, 5])
def test_2026_bodies_the_decoder_reports(body: Any) -> None:
    headers = {"content-type": JSON, "accept": ACCEPT}
    assert SET.by_version[MODERN].check_http(http(body, headers)) is None


def test_2026_header_naming_a_spoken_revision_while_meta_names_another() -> None:
    """Header 2026-07-28, `_meta` another revision: a header/body mismatch (-32020),
    not an unsupported version (conformance sep-2575-http-server-header-mismatch-400)."""
    for named in ("v999.0.0", "2025-06-18"):
        body = request(version=named)
        headers = modern_headers()
        selected = select(body, headers)
        assert version_of(selected) == MODERN
        mismatch(body, headers)
    # Both naming the same unknown revision: unsupported, as before.
    selected = select(request(version="v999.0.0"), {"mcp-protocol-version": "v999.0.0"})
    assert isinstance(selected, Failure) and selected.kind is FailureKind.UNSUPPORTED_VERSION


# ------------------------------------------------------- Mcp-Param headers

TOOL = {
    "name": "query",
    "inputSchema": {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {
                "type": "object",
                "properties": {
                    "shard": {"type": "integer", "x-mcp-header": "Shard"},
                    "fast": {"type": "boolean", "x-mcp-header": "Fast"},
                },
            },
        },
    },
}


def check_param_headers(
    adapter: Any, tool: dict[str, Any], arguments: Any, headers: dict[str, str] | None
) -> Any:
    """The check the forwarder makes: the tool's declared header parameters (none when
    its annotations break the rules) against the call."""
    declared = adapter.client_param_paths(tool) or {}
    return adapter.check_declared_headers(declared, arguments, headers)


def param_check(arguments: Any, headers: dict[str, str], transport: str = "http") -> Any:
    preamble = http(None, {k.lower(): v for k, v in headers.items()}, transport=transport)
    adapter = SET.by_version[MODERN]
    return check_param_headers(adapter, TOOL, arguments, adapter.param_headers_of(preamble))


@pytest.mark.parametrize(
    ("arguments", "headers"),
    [
        ({}, {}),
        ({"region": None}, {}),
        ({"region": "us-west1"}, {"Mcp-Param-Region": "us-west1"}),
        ({"region": "Hello, 世界"}, {"Mcp-Param-Region": "=?base64?SGVsbG8sIOS4lueVjA==?="}),
        ({"region": " padded "}, {"Mcp-Param-Region": "=?base64?IHBhZGRlZCA=?="}),
        ({"region": "=?base64?SGk="}, {"Mcp-Param-Region": "=?base64?SGk="}),  # literal
        ({"region": "SGk="}, {"Mcp-Param-Region": "SGk="}),
        ({"opts": {"shard": 42}}, {"mcp-param-shard": "42"}),
        ({"opts": {"shard": 42}}, {"Mcp-Param-Shard": "42.0"}),
        (
            {"opts": {"shard": -7, "fast": False}},
            {"Mcp-Param-Shard": "-7", "Mcp-Param-Fast": "false"},
        ),
        ({"opts": {"tags": ["a"]}}, {}),
    ],
)
def test_2026_param_headers_accepted(arguments: Any, headers: dict[str, str]) -> None:
    assert param_check(arguments, headers) is None


@pytest.mark.parametrize(
    ("arguments", "headers"),
    [
        ({"region": "Hello"}, {"Mcp-Param-Region": "=?base64?SGVsbG8?="}),  # bad padding
        ({"region": "Hello"}, {"Mcp-Param-Region": "=?base64?SGVs!!!bG8=?="}),  # bad chars
        ({"region": "Hello"}, {"Mcp-Param-Region": "=?base64?/w==?="}),  # not UTF-8
        ({"region": "café"}, {"Mcp-Param-Region": "café"}),  # not visible ASCII
        ({"region": "Hello"}, {}),  # omitted while the body has it
        ({"region": "Hello"}, {"Mcp-Param-Region": "World"}),
        ({"region": "Hello"}, {"Mcp-Param-Region": "hello"}),  # values are case-sensitive
        ({}, {"Mcp-Param-Region": "Hello"}),  # the body has no such value
        ({"region": None}, {"Mcp-Param-Region": "null"}),
        ({"opts": {"shard": 42}}, {}),
        ({"opts": {"shard": 42}}, {"Mcp-Param-Shard": "43"}),
        ({"opts": {"shard": 42}}, {"Mcp-Param-Shard": "forty-two"}),
        ({"opts": {"fast": True}}, {"Mcp-Param-Fast": "True"}),
    ],
)
def test_2026_param_headers_refused(arguments: Any, headers: dict[str, str]) -> None:
    failure = param_check(arguments, headers)
    assert isinstance(failure, Failure), (arguments, headers)
    assert failure.kind is FailureKind.HEADER_MISMATCH
    assert SET.by_version[MODERN].http_status(failure) == 400
    assert SET.by_version[MODERN].encode_failure(1, failure)["error"]["code"] == -32020


def test_param_headers_only_on_2026_streamable_http() -> None:
    assert param_check({"region": "Hello"}, {}, transport="stdio") is None
    for version in LEGACY:
        adapter = SET.by_version[version]
        assert not adapter.mirrors_params
        assert check_param_headers(adapter, TOOL, {"region": "x"}, {}) is None
    # A tool whose annotations break the rules declares nothing to check.
    broken = {"inputSchema": {"properties": {"a": {"type": "array", "x-mcp-header": "A"}}}}
    assert check_param_headers(SET.by_version[MODERN], broken, {"a": [1]}, {}) is None


def test_a_set_needs_an_adapter_and_only_known_revisions() -> None:
    with pytest.raises(ValueError) as empty:
        AdapterSet([])
    assert str(empty.value) == "an AdapterSet needs at least one adapter"
    with pytest.raises(ValueError) as unknown:
        SET.only(["2099-01-01", "2025-06-18", "1999-01-01"])
    assert str(unknown.value) == "unknown protocol revision(s): 1999-01-01, 2099-01-01"


def test_only_a_decoding_adapter_is_the_calls_adapter() -> None:
    assert (
        adapter_of(ClientContext("2025-06-18", adapter=SET.by_version["2025-06-18"]))
        is (SET.by_version["2025-06-18"])
    )
    assert adapter_of(ClientContext("2025-06-18")) is None
    assert adapter_of(ClientContext("2025-06-18", adapter="2025-06-18")) is None


# ------------------------------------------------------------------ decode


def test_decode_refuses_a_revisions_missing_headers_in_that_revision() -> None:
    """The header rules are the picked revision's, and its words say the refusal."""
    body = request(version=MODERN)
    inbound = SET.decode(Preamble(body=body, headers={"content-type": JSON, "accept": ACCEPT}))
    assert not isinstance(inbound, Failure)
    assert inbound.adapter.version == MODERN and inbound.items == []
    assert inbound.refused is not None and "MCP-Protocol-Version" in inbound.refused.message
    # The same message over stdio has no headers to check: it decodes.
    line = SET.decode(Preamble(body=body, headers={}, transport="stdio"))
    assert not isinstance(line, Failure) and line.refused is None and len(line.items) == 1


def test_decode_keeps_a_sessions_client_on_its_negotiated_revision() -> None:
    negotiated = SET.by_version["2025-06-18"]
    view = SessionView(id="s", protocol_version="2025-06-18", adapter=negotiated)
    headers = {"content-type": JSON, "accept": ACCEPT, "mcp-protocol-version": "2025-11-25"}
    inbound = SET.decode(Preamble(body=request(), headers=headers, session=view))
    assert not isinstance(inbound, Failure) and inbound.refused is None
    assert inbound.adapter is negotiated
    # An initialize starts again on the revision it asks for.
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    again = SET.decode(Preamble(body=init, headers=headers, session=view))
    assert not isinstance(again, Failure) and again.adapter.version == "2025-11-25"


def test_decode_names_no_revision_it_does_not_speak() -> None:
    headers = {"content-type": JSON, "accept": ACCEPT, "mcp-protocol-version": "1999-01-01"}
    assert isinstance(SET.decode(Preamble(body=request(), headers=headers)), Failure)
