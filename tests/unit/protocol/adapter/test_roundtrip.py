"""Round trips across every ordered pair of revisions.

A message from a client of revision A is decoded by A's server role, sent upstream
with B's client role (``client_request`` + ``client_headers``), and decoded again by
B's server role: the operation, method, name and essential params survive.
"""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import Answer, Call, Operation, Preamble, SessionView
from gateway.protocol.adapter import Adapter
from gateway.protocol.selection import AdapterSet

SET = AdapterSet.default()
VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
MODERN = "2026-07-28"
PAIRS = [(a, b) for a in VERSIONS for b in VERSIONS]
PAIR_IDS = [f"{a}->{b}" for a, b in PAIRS]
CAPS = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}
INFO = {"name": "client", "version": "1.0"}
META = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "x.y/z": 1}

REQUESTS: dict[str, dict[str, Any]] = {
    "tools/list": {"cursor": "page-2"},
    "tools/call": {"name": "café-tool", "arguments": {"a": 1, "nested": {"b": [True, None]}}},
    "resources/list": {},
    "resources/templates/list": {"cursor": ""},
    "resources/read": {"uri": "file:///docs/ünïcode.txt"},
    "prompts/list": {"x-vendor": 1},
    "prompts/get": {"name": "greet", "arguments": {"who": "world"}},
    "completion/complete": {
        "ref": {"type": "ref/prompt", "name": "greet"},
        "argument": {"name": "who", "value": "wo"},
        "context": {"arguments": {"lang": "en"}},
    },
}


def adapter(version: str) -> Adapter:
    return SET.by_version[version]


def session(version: str) -> SessionView:
    return SessionView(
        id="s",
        protocol_version=version,
        capabilities=dict(CAPS),
        info=dict(INFO),
    )


def client_message(version: str, method: str, id_: Any) -> dict[str, Any]:
    params: dict[str, Any] = dict(REQUESTS[method])
    meta: dict[str, Any] = {**META, "progressToken": f"p-{id_}"}
    if version == MODERN:
        meta.update(
            {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": dict(CAPS),
                "io.modelcontextprotocol/clientInfo": dict(INFO),
            }
        )
    params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def decode_as_server(
    version: str, message: dict[str, Any], headers: dict[str, str] | None = None
) -> Call:
    """Decode with ``version``'s server role; with ``headers``, check the transport too."""
    a = adapter(version)
    preamble = Preamble(
        body=message,
        headers={
            "content-type": "application/json",
            **{k.lower(): v for k, v in (headers or {}).items()},
        },
        session=session(version) if a.has_handshake else None,
    )
    if headers is not None:
        # The transport rules of B hold for what B's client role produced,
        assert a.check_http(preamble) is None
        # and selection picks B for it.
        assert SET.select(preamble) is a
    items = a.decode(preamble)
    assert len(items) == 1
    assert isinstance(items[0], Call), items[0]
    return items[0]


def essential(version: str, method: str) -> dict[str, Any]:
    params = dict(REQUESTS[method])
    if method == "completion/complete" and version < "2025-06-18":
        params.pop("context")  # not understood before 2025-06-18
    return params


@pytest.mark.parametrize(("client", "server"), PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("method", list(REQUESTS))
def test_round_trip(client: str, server: str, method: str) -> None:
    downstream = decode_as_server(client, client_message(client, method, "down-7"))
    assert downstream.method == method

    upstream = adapter(server)
    message = upstream.client_request(downstream, 1001)
    headers = upstream.client_headers(downstream, "upstream-session")
    decoded = decode_as_server(server, message, headers)

    assert decoded.id == 1001
    assert decoded.operation is downstream.operation is Operation(method)
    assert decoded.method == method
    assert (
        decoded.name
        == downstream.name
        == REQUESTS[method].get("uri" if method == "resources/read" else "name")
    )
    assert decoded.params == essential(server, method)
    assert decoded.meta == META
    assert decoded.progress_token == "p-down-7"
    if server == MODERN:
        assert decoded.client.protocol_version == MODERN
        assert decoded.client.capabilities == upstream.client_project_capabilities(CAPS)
        assert decoded.client.info == INFO


@pytest.mark.parametrize("client", VERSIONS)
@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "resources/read"])
def test_answers_and_state_reach_a_2026_upstream(client: str, method: str) -> None:
    downstream = decode_as_server(client, client_message(client, method, 3))
    downstream.answers = {"k": Answer(result={"action": "accept", "content": {"x": 1}})}
    downstream.state = "sealed"
    upstream = adapter(MODERN)
    decoded = decode_as_server(
        MODERN, upstream.client_request(downstream, 4), upstream.client_headers(downstream, None)
    )
    assert decoded.answers == downstream.answers
    assert decoded.state == "sealed"
    assert decoded.params == essential(MODERN, method)


def test_log_level_reaches_a_2026_upstream() -> None:
    downstream = decode_as_server("2025-06-18", client_message("2025-06-18", "tools/list", 1))
    downstream.client.log_level = "error"
    upstream = adapter(MODERN)
    decoded = decode_as_server(
        MODERN, upstream.client_request(downstream, 2), upstream.client_headers(downstream, None)
    )
    assert decoded.client.log_level == "error"
