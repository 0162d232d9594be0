"""2026-07-28 `x-mcp-header` (Streamable HTTP transport, "Custom Headers from Tool
Parameters"): which tool parameters a tool declares for mirroring, the
`Mcp-Param-{Name}` headers a client sends, and a server's validation of them."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from gateway.core import Failure, FailureKind, Preamble
from gateway.protocol import AdapterSet
from gateway.protocol.adapter import stateless

MODERN = AdapterSet.default().by_version["2026-07-28"]
LEGACY = AdapterSet.default().by_version["2025-11-25"]


def paths_of(schema: dict[str, Any]) -> dict[tuple[str, ...], str] | None:
    """The tool's header parameters, worked out afresh: what a tool is found to
    declare is kept per tool object, so each check gets an object of its own."""
    return MODERN.client_param_paths(copy.deepcopy(schema))


def tool(properties: dict[str, Any], **schema: Any) -> dict[str, Any]:
    return {"name": "t", "inputSchema": {"type": "object", "properties": properties, **schema}}


def header(name: str, kind: str = "string", **more: Any) -> dict[str, Any]:
    return {"type": kind, "x-mcp-header": name, **more}


SQL = tool(
    {
        "region": header("Region"),
        "query": {"type": "string"},
        "limit": header("Limit", "integer"),
        "dry": header("Dry", "boolean"),
        "where": {"type": "object", "properties": {"zone": header("Zone")}},
    }
)


def test_annotated_parameters_are_found_by_their_property_path() -> None:
    assert paths_of(SQL) == {
        ("region",): "Region",
        ("limit",): "Limit",
        ("dry",): "Dry",
        ("where", "zone"): "Zone",
    }
    assert paths_of(tool({"query": {"type": "string"}})) == {}
    assert paths_of({"name": "bare"}) == {}
    # Before the stateless era no parameter is mirrored.
    assert LEGACY.client_param_paths(SQL) == {}


def test_a_tools_header_parameters_are_worked_out_once_and_the_memo_is_bounded() -> None:
    listed = copy.deepcopy(SQL)
    first = MODERN.client_param_paths(listed)
    assert MODERN.client_param_paths(listed) is first  # every call of it asks again
    assert MODERN.client_param_paths(copy.deepcopy(SQL)) is not first
    tools = [tool({"a": header(f"H{n}")}) for n in range(stateless._PATHS_KEPT + 10)]
    for each in tools:
        assert MODERN.client_param_paths(each) == {
            ("a",): each["inputSchema"]["properties"]["a"]["x-mcp-header"]
        }
        assert len(stateless._PATHS) <= stateless._PATHS_KEPT


@pytest.mark.parametrize(
    "schema",
    [
        tool({"a": header("")}),  # empty
        tool({"a": header("Bad Name")}),  # not a token
        tool({"a": header("Bad\r\nName")}),
        tool({"a": {"type": "string", "x-mcp-header": 5}}),
        tool({"a": header("Same"), "b": header("same")}),  # not unique, ignoring case
        tool({"a": header("A", "number")}),  # only integer, string, boolean
        tool({"a": header("A", "object")}),
        tool({"a": {"x-mcp-header": "A"}}),  # no type: not a primitive
        # Reachable only through `properties` chains from the root.
        tool({"a": {"type": "array", "items": header("A")}}),
        tool({}, oneOf=[{"properties": {"a": header("A")}}]),
        tool({"a": {"anyOf": [header("A")]}}),
        {"name": "t", "inputSchema": {"type": "string", "x-mcp-header": "Root"}},
        tool({}, **{"not": {"properties": {"a": header("A")}}}),  # `properties` under `not`
    ],
)
def test_a_tool_whose_annotation_breaks_the_rules_is_invalid(schema: dict[str, Any]) -> None:
    assert paths_of(schema) is None


def test_a_client_mirrors_each_value_present_and_omits_the_rest() -> None:
    paths = paths_of(SQL)
    assert paths is not None
    arguments = {"region": "us-west1", "query": "SELECT 1", "limit": 42, "dry": False}
    assert MODERN.client_param_headers(paths, arguments) == {
        "Mcp-Param-Region": "us-west1",
        "Mcp-Param-Limit": "42",
        "Mcp-Param-Dry": "false",
    }
    nested = {"where": {"zone": "b"}, "dry": True, "limit": -7}
    assert MODERN.client_param_headers(paths, nested) == {
        "Mcp-Param-Zone": "b",
        "Mcp-Param-Dry": "true",
        "Mcp-Param-Limit": "-7",
    }
    # null, absent, not a primitive, beyond JavaScript's safe integers: omitted.
    odd = {"region": None, "where": "flat", "limit": 2**53, "dry": [True]}
    assert MODERN.client_param_headers(paths, odd) == {}
    assert MODERN.client_param_headers(paths, {"limit": 2**53 - 1}) == {
        "Mcp-Param-Limit": str(2**53 - 1)
    }


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ],
)
def test_values_not_safe_as_plain_ascii_are_sent_in_base64(value: str, sent: str) -> None:
    """The spec's encoding examples."""
    headers = MODERN.client_param_headers({("text",): "Text"}, {"text": value})
    assert headers == {"Mcp-Param-Text": sent}


def post(headers: dict[str, str], transport: str = "http", method: str = "POST") -> Preamble:
    return Preamble(
        body=None,
        headers={k.lower(): v for k, v in headers.items()},
        transport=transport,
        http_method=method,
    )


def check_param_headers(
    tool: dict[str, Any], arguments: Any, headers: Mapping[str, str] | None
) -> Failure | None:
    """The check the forwarder makes: the tool's declared header parameters (none when
    its annotations break the rules) against the call."""
    return MODERN.check_declared_headers(MODERN.client_param_paths(tool) or {}, arguments, headers)


def check(arguments: Any, headers: dict[str, str], schema: dict[str, Any] = SQL) -> str | None:
    """The server's verdict: None, or the mismatch's message."""
    failure = check_param_headers(
        copy.deepcopy(schema), arguments, MODERN.param_headers_of(post(headers))
    )
    if failure is None:
        return None
    assert failure.kind is FailureKind.HEADER_MISMATCH
    assert MODERN.encode_failure(1, failure)["error"]["code"] == -32020
    return failure.message


def test_a_server_accepts_headers_that_match_the_body() -> None:
    arguments = {"region": "us-west1", "limit": 42, "dry": True, "where": {"zone": "b"}}
    sent = MODERN.client_param_headers(paths_of(SQL) or {}, arguments)
    assert check(arguments, sent) is None
    # Integers compare as numbers; absent and null values expect no header.
    assert check({"limit": 42}, {"Mcp-Param-Limit": "42.0"}) is None
    assert check({"region": None}, {}) is None
    assert check({}, {}) is None
    # Base64 is decoded before comparing; surrounding blanks are not part of a value.
    assert (
        check({"region": "Hello, 世界"}, {"Mcp-Param-Region": "=?base64?SGVsbG8sIOS4lueVjA==?="})
        is None
    )
    assert check({"region": "x y"}, {"Mcp-Param-Region": " x y\t"}) is None
    assert check({"region": "a\tb"}, {"Mcp-Param-Region": "a\tb"}) is None
    assert check({"region": "~"}, {"Mcp-Param-Region": "~"}) is None
    assert check({"region": "X1"}, {"Mcp-Param-Region": "X1"}) is None


@pytest.mark.parametrize(
    ("arguments", "headers", "names"),
    [
        # Omitted though the value is in the body: the header is required.
        ({"region": "eu"}, {}, ["Mcp-Param-Region", "arguments.region", "required"]),
        ({"where": {"zone": "b"}}, {}, ["Mcp-Param-Zone", "arguments.where.zone"]),
        ({"dry": False}, {}, ["Mcp-Param-Dry", "required"]),
        # Present but different, or present for no value.
        ({"region": "eu"}, {"Mcp-Param-Region": "us"}, ["Mcp-Param-Region", "arguments.region"]),
        ({}, {"Mcp-Param-Region": "us"}, ["Mcp-Param-Region", "does not match"]),
        ({"dry": True}, {"Mcp-Param-Dry": "TRUE"}, ["Mcp-Param-Dry"]),
        ({"dry": False}, {"Mcp-Param-Dry": "true"}, ["Mcp-Param-Dry"]),
        ({"limit": 42}, {"Mcp-Param-Limit": "forty-two"}, ["Mcp-Param-Limit"]),
        ({"region": "42"}, {"Mcp-Param-Limit": "42"}, ["Mcp-Param-Region"]),
        # Characters a header may not hold, and malformed base64.
        ({"region": "é"}, {"Mcp-Param-Region": "é"}, ["Mcp-Param-Region", "not a valid"]),
        ({"region": "a"}, {"Mcp-Param-Region": "a\x7f"}, ["not a valid"]),
        ({"region": "a"}, {"Mcp-Param-Region": "a\x1f"}, ["not a valid"]),
        ({"region": "a"}, {"Mcp-Param-Region": "=?base64?!!?="}, ["not a valid"]),
        ({"region": "a"}, {"Mcp-Param-Region": "=?base64?/w==?="}, ["not a valid"]),
    ],
)
def test_a_server_refuses_headers_missing_malformed_or_unlike_the_body(
    arguments: dict[str, Any], headers: dict[str, str], names: list[str]
) -> None:
    message = check(arguments, headers)
    assert message is not None
    for name in names:
        assert name in message


def test_the_shortest_wrapping_is_still_base64() -> None:
    # `=?base64??=` wraps the empty string; shorter look-alikes are plain values.
    assert check({"region": ""}, {"Mcp-Param-Region": "=?base64??="}) is None
    assert check({"region": "=?base64?="}, {"Mcp-Param-Region": "=?base64?="}) is None
    assert check({"region": "=?base64?A?="}, {"Mcp-Param-Region": "=?base64?A?="}) is not None


def test_only_streamable_http_posts_carry_parameter_headers() -> None:
    arguments = {"region": "eu"}
    for preamble in (
        post({}, transport="stdio"),
        post({}, transport="sse"),
        post({}, method="GET"),
    ):
        assert MODERN.param_headers_of(preamble) is None  # the headers are not read there
        assert check_param_headers(copy.deepcopy(SQL), arguments, None) is None
    # A tool that declares nothing, or breaks the rules, expects nothing.
    assert check(arguments, {}, tool({})) is None
    assert check(arguments, {}, tool({"region": header("Region", "number")})) is None
    # Arguments that are not an object hold no values.
    assert check("junk", {}) is None
