"""Baseline: official-SDK client peer <-> server peer of the same revision, no gateway.

These pin down exactly what each pinned Python SDK does on its own, step by
step, so gateway tests can compare against them.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from peers.registry import (
    PYTHON_PINS,
    Peer,
    peer,
    require_installed,
    run_client,
    running_server,
)

pytestmark = pytest.mark.interop

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EXPECTED_URIS = {"demo://text", "demo://binary"} | {f"demo://many/{i}" for i in range(25)}
BASE_TOOLS = {"echo", "add", "image", "fail", "summarize", "show_roots", "progress"}

# What each server SDK answers to `nonexistent/method` (a baseline, not a wish):
# 1.9-1.30 validate the request against their closed request union first and answer
# -32602; 2.x answers -32601; 1.7.1 never answers (the client records a timeout).
UNKNOWN_METHOD_CODE = {
    "1.7.1": None,
    "1.9.4": -32602,
    "1.22.0": -32602,
    "1.30.0": -32602,
    "2.3.0": -32601,
}


def pair(version: str, client_suffix: str = "client") -> tuple[Peer, Peer]:
    client = peer(f"python-{version}-{client_suffix}")
    server = peer(f"python-{version}-server")
    require_installed(client, server)
    return client, server


def result(out: dict[str, Any], step: str) -> Any:
    entry = out["steps"].get(step)
    assert entry is not None, f"step {step} missing; stderr:\n{out['_stderr'][-3000:]}"
    assert "result" in entry, f"step {step} failed: {entry}; stderr:\n{out['_stderr'][-3000:]}"
    return entry["result"]


def texts(call: dict[str, Any]) -> list[str]:
    return [c["text"] for c in call["content"] if c["type"] == "text"]


def check_basic(out: dict[str, Any], client: Peer, server: Peer) -> None:
    revision = client.revision
    assert out["protocolVersion"] == revision
    connect = result(out, "connect")
    assert connect["protocolVersion"] == revision
    assert out["sdk"] == client.sdk
    _check_tools(out, server)
    _check_calls(out, server)
    _check_resources(out)
    _check_prompts(out)
    unknown = out["steps"]["unknown_method"]
    assert "error" in unknown, unknown
    version = server.sdk.split()[-1]
    assert unknown["error"]["code"] == UNKNOWN_METHOD_CODE[version], unknown


def _check_tools(out: dict[str, Any], server: Peer) -> None:
    tools = {t["name"]: t for t in result(out, "tools_list")["tools"]}
    expected_tools = set(BASE_TOOLS)
    if "elicitation" in server.capabilities:
        expected_tools.add("ask_name")
    if "missing_capability_tool" in server.capabilities:
        expected_tools.add("test_missing_capability")
    assert set(tools) == expected_tools
    assert tools["add"]["inputSchema"]["properties"]["a"]["type"] == "integer"
    if "structured_output" in server.capabilities:
        assert tools["add"]["outputSchema"]["properties"]["sum"]["type"] == "integer"
    else:
        assert "outputSchema" not in tools["add"]


def _check_calls(out: dict[str, Any], server: Peer) -> None:
    echo = result(out, "call_echo")
    assert texts(echo) == ["echo: hi"]
    assert echo.get("isError", False) is False

    add = result(out, "call_add")
    assert texts(add) == ["5"]
    assert add.get("isError", False) is False
    if "structured_output" in server.capabilities:
        assert add["structuredContent"] == {"sum": 5}
    else:
        assert "structuredContent" not in add

    assert result(out, "call_add_invalid")["isError"] is True

    image = result(out, "call_image")
    assert len(image["content"]) == 1
    block = image["content"][0]
    assert block["type"] == "image" and block["mimeType"] == "image/png"
    assert base64.b64decode(block["data"]).startswith(PNG_SIGNATURE)

    fail = result(out, "call_fail")
    assert fail["isError"] is True
    assert texts(fail) == ["this tool always fails"]


def _check_resources(out: dict[str, Any]) -> None:
    uris = result(out, "resources_list")
    assert len(uris) == len(EXPECTED_URIS), uris  # every page followed, nothing twice
    assert set(uris) == EXPECTED_URIS

    text = result(out, "read_text")["contents"]
    assert [(c["uri"], c.get("mimeType"), c["text"]) for c in text] == [
        ("demo://text", "text/plain", "hello resource")
    ]
    binary = result(out, "read_binary")["contents"]
    assert len(binary) == 1 and binary[0]["uri"] == "demo://binary"
    assert binary[0]["mimeType"] == "application/octet-stream"
    assert base64.b64decode(binary[0]["blob"]) == bytes(range(16))

    templates = result(out, "templates_list")["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["demo://items/{id}"]
    item = result(out, "read_template")["contents"]
    assert [(c["uri"], c["text"]) for c in item] == [("demo://items/42", "item 42")]


def _check_prompts(out: dict[str, Any]) -> None:
    prompts = result(out, "prompts_list")["prompts"]
    assert [p["name"] for p in prompts] == ["greet"]
    assert [(a["name"], a.get("required")) for a in prompts[0]["arguments"]] == [("name", True)]
    greet = result(out, "get_greet")
    assert [(m["role"], m["content"]) for m in greet["messages"]] == [
        ("user", {"type": "text", "text": "Hello, Ada!"})
    ]

    assert result(out, "complete")["completion"]["values"] == ["alice"]


def check_interactive(out: dict[str, Any], client: Peer, server: Peer) -> None:
    if "elicitation" in server.capabilities and "elicitation" in client.capabilities:
        assert texts(result(out, "call_ask_name")) == ["hello Ada"]
    assert texts(result(out, "call_summarize")) == ["summary: sampled: hello world"]
    assert texts(result(out, "call_show_roots")) == ["file:///tmp/root"]
    progress = result(out, "call_progress")
    assert texts(progress) == ["done 3"]
    assert progress["progress"] == [1, 2, 3]
    assert progress["logs"] == ["working"] * 3


VERSIONS = list(PYTHON_PINS.values())


@pytest.mark.parametrize("version", VERSIONS)
def test_basic_http(version: str) -> None:
    client, server = pair(version)
    transport = server.http_transport()
    with running_server(server, transport) as url:
        out = run_client(client, url, transport, "basic")
    check_basic(out, client, server)


@pytest.mark.parametrize("version", VERSIONS)
def test_interactive_http(version: str) -> None:
    client, server = pair(version)
    transport = server.http_transport()
    with running_server(server, transport) as url:
        out = run_client(client, url, transport, "interactive")
    check_basic(out, client, server)
    check_interactive(out, client, server)


def test_v2_client_legacy_mode_against_v2_server() -> None:
    """`Client(mode="legacy")` does the initialize handshake at 2025-11-25."""
    version = PYTHON_PINS["2026-07-28"]
    client, server = pair(version, "client-legacy")
    with running_server(server, "streamable-http") as url:
        out = run_client(client, url, "streamable-http", "interactive")
    assert out["protocolVersion"] == "2025-11-25"
    check_basic(out, client, server)
    check_interactive(out, client, server)


def test_sse_transport_on_streamable_era_sdk() -> None:
    """The 1.x servers keep serving HTTP+SSE after streamable HTTP arrived."""
    client, server = pair(PYTHON_PINS["2025-11-25"])
    with running_server(server, "sse") as url:
        out = run_client(client, url, "sse", "basic")
    check_basic(out, client, server)


@pytest.mark.parametrize(
    "version",
    [PYTHON_PINS["2024-11-05"], PYTHON_PINS["2025-11-25"], PYTHON_PINS["2026-07-28"]],
)
def test_stdio(version: str) -> None:
    client, server = pair(version)
    with running_server(server, "stdio") as argv:
        out = run_client(client, argv, "stdio", "interactive")
    check_basic(out, client, server)
    check_interactive(out, client, server)
