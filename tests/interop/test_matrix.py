"""The interop matrix: every client revision through the gateway to every upstream revision.

Rows are client revisions, columns upstream revisions, 5 x 5 = 25 cells.  Each
cell runs a real official-SDK client (pinned, in its own environment) against
a real official-SDK server through one `gateway serve` process, over loopback
HTTP, and checks every step of the contract's `basic` scenario, projected onto
the weaker of the two revisions.  `scripts/matrix` prints the table.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from peers.registry import (
    Peer,
    peer,
    require_installed,
    route_options,
    run_client,
    running_server,
)

from tests.e2e.gateway_proc import RunningGateway, gateway

pytestmark = pytest.mark.interop

REVISIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
# Which pinned SDK stands for which revision (docs/testing.md shows the same table).
CLIENTS = {
    "2024-11-05": "python-1.7.1-client",
    "2025-03-26": "python-1.9.4-client",
    "2025-06-18": "python-1.22.0-client",
    "2025-11-25": "node-sdk1-client",
    "2026-07-28": "python-2.3.0-client",
}
SERVERS = {
    "2024-11-05": "python-1.7.1-server",
    "2025-03-26": "python-1.9.4-server",
    "2025-06-18": "python-1.22.0-server",
    "2025-11-25": "node-sdk1-server",
    "2026-07-28": "python-2.3.0-server",
}
EXPECTED_URIS = {"demo://text", "demo://binary"} | {f"demo://many/{i}" for i in range(25)}
BASE_TOOLS = {"echo", "add", "image", "fail", "summarize", "show_roots", "progress"}
METHOD_NOT_FOUND = -32601
# What the older Python SDK servers answer to an unknown method themselves (direct, no
# gateway): 1.9.4, 1.22.0 and 1.30.0 fail the request's validation; 1.7.1 drops its SSE stream,
# which the gateway reports as the answer lost after the request was sent.  Every other
# server: -32601.
UNKNOWN_METHOD_ANSWER = {
    "python-1.7.1-server": (-32603, "its server's answer was lost"),
    "python-1.9.4-server": (-32602, "Invalid request parameters"),
    "python-1.22.0-server": (-32602, "Invalid request parameters"),
    "python-1.30.0-server": (-32602, "Invalid request parameters"),
}
# What the `progress` tool logs (at info, once per step): every client asks for info
# (logging/setLevel, or 2026-07-28's per-request level).
PROGRESS_LOGS = ["working"] * 3
RESULTS = Path(os.environ.get("MATRIX_RESULTS", Path(__file__).parent / ".matrix.json"))


def route_of(revision: str) -> str:
    return "/u" + revision.replace("-", "")


@pytest.fixture(scope="module")
def matrix_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    servers = [peer(name) for name in SERVERS.values()]
    require_installed(*servers, *(peer(name) for name in CLIENTS.values()))
    with ExitStack() as stack:
        routes = []
        for revision, server in zip(SERVERS, servers, strict=True):
            url = stack.enter_context(running_server(server, server.http_transport()))
            assert isinstance(url, str)
            routes.append(f"{route_of(revision)}={url},timeout=20{route_options(server)}")
        yield stack.enter_context(gateway(*routes, tmp_path=tmp_path_factory.mktemp("gw")))


def texts(call: dict[str, Any]) -> list[str]:
    return [c["text"] for c in call.get("content", []) if c.get("type") == "text"]


def check_cell(out: dict[str, Any], client_rev: str, server: Peer) -> dict[str, str]:
    """Every step's verdict: "ok" or what was wrong."""
    steps = out.get("steps", {})
    structured = client_rev >= "2025-06-18" and "structured_output" in server.capabilities
    checks = _step_checks(client_rev, structured)
    verdicts = {name: _verdict(steps.get(name), check) for name, check in checks.items()}
    # The upstream's own answer to an unknown method, relayed: not a timeout, a dropped
    # client connection or some other error.
    unknown = steps.get("unknown_method", {})
    error = unknown.get("error") or {}
    code, message = UNKNOWN_METHOD_ANSWER.get(server.name, (METHOD_NOT_FOUND, ""))
    answered = error.get("code") == code and message in str(error.get("message"))
    verdicts["unknown_method"] = "ok" if answered else f"wrong: {unknown}"[:300]
    return verdicts


def _verdict(entry: dict[str, Any] | None, check: Callable[[dict[str, Any]], None]) -> str:
    if entry is None:
        return "missing"
    if "result" not in entry:
        return f"error: {entry.get('error')}"
    try:
        check(entry["result"])
    except AssertionError as exc:
        return f"wrong: {exc}"[:300]
    return "ok"


FAILS = "this tool always fails"


def _step_checks(client_rev: str, structured: bool) -> dict[str, Callable[[Any], None]]:
    """What each step's result must be, for a client of ``client_rev``."""
    return {
        "connect": lambda r: _eq(r.get("protocolVersion") in (client_rev, None), True, r),
        "tools_list": lambda r: _tools(r, structured),
        "call_echo": lambda r: _eq(texts(r), ["echo: hi"]),
        "call_add": lambda r: _add(r, structured),
        "call_add_invalid": lambda r: _eq(r.get("isError"), True),
        "call_image": _image,
        "call_fail": lambda r: _eq(
            (r.get("isError"), texts(r)), (True, ["this tool always fails"])
        ),
        "resources_list": lambda r: _eq(set(r), EXPECTED_URIS),
        "read_text": lambda r: _eq([c["text"] for c in r["contents"]], ["hello resource"]),
        "read_binary": _binary,
        "templates_list": lambda r: _eq(
            [t["uriTemplate"] for t in r["resourceTemplates"]], ["demo://items/{id}"]
        ),
        "read_template": lambda r: _eq([c["text"] for c in r["contents"]], ["item 42"]),
        "prompts_list": lambda r: _eq([p["name"] for p in r["prompts"]], ["greet"]),
        "get_greet": lambda r: _eq(
            [m["content"].get("text") for m in r["messages"]], ["Hello, Ada!"]
        ),
        "complete": lambda r: _eq(r["completion"]["values"], ["alice"]),
    }


def _tools(r: dict[str, Any], structured: bool) -> None:
    by_name = {t["name"]: t for t in r["tools"]}
    assert set(by_name) >= BASE_TOOLS, sorted(by_name)
    assert by_name["add"]["inputSchema"]["properties"]["a"]["type"] == "integer"
    assert ("outputSchema" in by_name["add"]) == structured, by_name["add"]


def _add(r: dict[str, Any], structured: bool) -> None:
    assert "5" in texts(r) or '{"sum":5}' in texts(r), r
    if structured:
        assert r["structuredContent"] == {"sum": 5}, r
    else:
        assert "structuredContent" not in r, r


def _image(r: dict[str, Any]) -> None:
    block = r["content"][0]
    assert block["type"] == "image" and block["mimeType"] == "image/png", block
    assert base64.b64decode(block["data"]).startswith(b"\x89PNG"), block


def _binary(r: dict[str, Any]) -> None:
    (content,) = r["contents"]
    assert base64.b64decode(content["blob"]) == bytes(range(16)), content


def _eq(actual: Any, expected: Any, shown: Any = None) -> None:
    assert actual == expected, shown if shown is not None else f"{actual!r} != {expected!r}"


def _record(client_rev: str, server_rev: str, verdicts: dict[str, str]) -> None:
    table: dict[str, Any] = {}
    if RESULTS.exists():
        try:
            table = json.loads(RESULTS.read_text())
        except ValueError:
            table = {}
    table[f"{client_rev}|{server_rev}"] = verdicts
    RESULTS.write_text(json.dumps(table, indent=1, sort_keys=True))


@pytest.mark.parametrize("server_rev", REVISIONS, ids=lambda r: f"upstream-{r}")
@pytest.mark.parametrize("client_rev", REVISIONS, ids=lambda r: f"client-{r}")
def test_cell(matrix_gateway: RunningGateway, client_rev: str, server_rev: str) -> None:
    client = peer(CLIENTS[client_rev])
    server = peer(SERVERS[server_rev])
    transport = client.http_transport()
    out = run_client(client, matrix_gateway.url(route_of(server_rev)), transport, "basic")
    verdicts = check_cell(out, client_rev, server)
    _record(client_rev, server_rev, verdicts)
    failed = {k: v for k, v in verdicts.items() if v != "ok"}
    assert not failed, (
        f"{client_rev} client -> {server_rev} upstream: {json.dumps(failed, indent=1)}\n"
        f"client stderr:\n{out.get('_stderr', '')[-2000:]}\n"
        f"gateway log:\n{matrix_gateway.log()[-3000:]}"
    )


def check_interactive(out: dict[str, Any], client_rev: str, server: Peer) -> dict[str, str]:
    """Asks, progress and logs across the pair: what the weaker side can express."""
    verdicts: dict[str, str] = {}
    steps = out.get("steps", {})
    elicits = "elicitation" in server.capabilities
    client_elicits = client_rev >= "2025-06-18"

    def step(name: str, expected: Any) -> None:
        entry = steps.get(name, {})
        if "result" not in entry:
            verdicts[name] = f"error: {entry.get('error', 'missing')}"
            return
        got = texts(entry["result"])
        ok = expected(got) if callable(expected) else got == expected
        verdicts[name] = "ok" if ok else f"wrong: {got}"[:300]

    if elicits and client_elicits:
        step("call_ask_name", ["hello Ada"])
    elif elicits:
        # The client's revision has no elicitation: the tool says what it needs, and
        # how to answer it in arguments (the model's next call).
        step("call_ask_name", lambda got: any("_mcp_answers" in t for t in got))
    step("call_summarize", ["summary: sampled: hello world"])
    step("call_show_roots", ["file:///tmp/root"])
    # A handshake-era client's logging/setLevel must succeed (2026-07-28 asks per request).
    if client_rev != "2026-07-28":
        level = steps.get("set_level", {})
        verdicts["set_level"] = "ok" if "result" in level else f"error: {level or 'missing'}"
    entry = steps.get("call_progress", {})
    result = entry.get("result")
    logs = PROGRESS_LOGS
    if result is None:
        verdicts["call_progress"] = f"error: {entry.get('error', 'missing')}"
    elif texts(result) != ["done 3"] or result.get("progress") != [1, 2, 3]:
        verdicts["call_progress"] = f"wrong: {texts(result)} progress={result.get('progress')}"
    elif result.get("logs") != logs:
        verdicts["call_progress"] = f"wrong: logs={result.get('logs')}, expected {logs}"
    else:
        verdicts["call_progress"] = "ok"
    return verdicts


@pytest.mark.parametrize("server_rev", REVISIONS, ids=lambda r: f"upstream-{r}")
@pytest.mark.parametrize("client_rev", REVISIONS, ids=lambda r: f"client-{r}")
def test_interactive_cell(matrix_gateway: RunningGateway, client_rev: str, server_rev: str) -> None:
    client = peer(CLIENTS[client_rev])
    server = peer(SERVERS[server_rev])
    transport = client.http_transport()
    out = run_client(client, matrix_gateway.url(route_of(server_rev)), transport, "interactive")
    verdicts = check_interactive(out, client_rev, server)
    _record(f"{client_rev}+asks", server_rev, verdicts)
    failed = {k: v for k, v in verdicts.items() if v != "ok"}
    assert not failed, (
        f"{client_rev} client -> {server_rev} upstream: {json.dumps(failed, indent=1)}\n"
        f"client stderr:\n{out.get('_stderr', '')[-2000:]}\n"
        f"gateway log:\n{matrix_gateway.log()[-3000:]}"
    )


# The revisions whose calls the pass-through lane may answer (client and server alike).
PASSING = ["2025-06-18", "2025-11-25", "2026-07-28"]


@pytest.fixture(scope="module")
def full_path_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """Those revisions' servers behind a gateway with the pass-through lane off."""
    with ExitStack() as stack:
        routes = []
        for revision in PASSING:
            server = peer(SERVERS[revision])
            url = stack.enter_context(running_server(server, server.http_transport()))
            assert isinstance(url, str)
            routes.append(f"{route_of(revision)}={url},timeout=20{route_options(server)}")
        tmp = tmp_path_factory.mktemp("gw-full")
        yield stack.enter_context(gateway(*routes, extra=("--no-pass-through",), tmp_path=tmp))


def _passed(gw: RunningGateway, revision: str) -> float:
    """Calls the gateway's pass-through lane answered on a revision's route."""
    with urllib.request.urlopen(gw.url("/metrics"), timeout=10) as response:
        text = response.read().decode()
    label = f'gateway_pass_through_total{{route="{route_of(revision)}"}} '
    return sum(float(line[len(label) :]) for line in text.splitlines() if line.startswith(label))


# The pairs it may carry: each of those revisions to its own, and each of the other
# era (the adapters translate the plain result; a stateless client's calls go on its
# pool of upstream sessions once the full path has opened it).
PAIRS = [(r, r) for r in PASSING] + [
    ("2025-06-18", "2026-07-28"),
    ("2025-11-25", "2026-07-28"),
    ("2026-07-28", "2025-06-18"),
    ("2026-07-28", "2025-11-25"),
]


@pytest.mark.parametrize("scenario", ["basic", "interactive"])
@pytest.mark.parametrize(("client_rev", "server_rev"), PAIRS)
def test_the_lanes_pairs_on_both_paths(
    matrix_gateway: RunningGateway,
    full_path_gateway: RunningGateway,
    client_rev: str,
    server_rev: str,
    scenario: str,
) -> None:
    """A pair the pass-through lane carries: every step holds with the lane on (which
    then answers calls) and off (which never does)."""
    client, server = peer(CLIENTS[client_rev]), peer(SERVERS[server_rev])
    check = check_cell if scenario == "basic" else check_interactive
    before = _passed(matrix_gateway, server_rev)
    for gw in (matrix_gateway, full_path_gateway):
        out = run_client(client, gw.url(route_of(server_rev)), client.http_transport(), scenario)
        failed = {k: v for k, v in check(out, client_rev, server).items() if v != "ok"}
        assert not failed, f"{scenario}: {json.dumps(failed, indent=1)}\n{gw.log()[-3000:]}"
    if scenario == "interactive" and client_rev > server_rev:
        # A stateless client declaring roots (show_roots) has its pool named by them:
        # every call of it is the full path's.
        assert _passed(matrix_gateway, server_rev) == before
    else:
        assert _passed(matrix_gateway, server_rev) > before
    assert _passed(full_path_gateway, server_rev) == 0
