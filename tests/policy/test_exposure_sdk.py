"""Exposure with real SDK clients of every revision through `gateway serve`:

- in front of `@modelcontextprotocol/server-everything` (Streamable HTTP, behind a
  recording hop that notes every request the server is sent): the tools, prompts,
  resources and templates listed are exactly the exposed ones; a hidden tool's call
  is refused the way an unknown tool is (-32602, "Unknown tool: echo") and never
  reaches the server;
- in front of a server that pages its tool list three to a page (the official Python
  SDK, spawned over stdio; it logs every call it gets, and the gateway logs its
  stderr): following ``nextCursor`` through the filtered list gives every exposed
  tool once, in order; the exposed tool's call reaches the server, the hidden one's
  does not.

What is expected is worked out from the servers' own unfiltered lists and the
route's patterns, with `fnmatch`: server-everything's as each client sees them
through a route of the same gateway without a policy (what it lists depends on the
client's capabilities: roots add a tool), the paged server's read directly.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
from peers.registry import peer, require_installed, run_client
from peers.thirdparty import SERVER_EVERYTHING, running_thirdparty
from peers.thirdparty import require_installed as require_thirdparty

from tests.e2e.gateway_proc import RunningGateway, gateway
from tests.policy.recorder import Recorder, recording

pytestmark = pytest.mark.interop

# One pinned SDK client per revision (as the interop matrix), and the TypeScript
# SDK's 2.x client for the newest revision too.
CLIENTS = {
    "2024-11-05": "python-1.7.1-client",
    "2025-03-26": "python-1.9.4-client",
    "2025-06-18": "python-1.22.0-client",
    "2025-11-25": "node-sdk1-client",
    "2026-07-28": "python-2.3.0-client",
    "2026-07-28-ts": "node-sdk2-client",
}
TOOLS = ("get-*", "gzip-*")  # allowed: echo, toggle-*, trigger-* ... are hidden
HIDDEN_PROMPTS = ("args-prompt",)
HIDDEN_RESOURCES = (
    "demo://resource/static/document/features.md",
    "demo://resource/dynamic/blob/*",
)
PAGED_TOOLS = ("echo", "tool_0[0-4]", "tool_17", "tool_2*")  # add is hidden
PAGED_SERVER = Path(__file__).with_name("paged_server.py")
PAGED_PYTHON = "python-1.22.0-client"  # its interpreter runs the paged server
REFERENCE = "python-1.22.0-client"  # reads the servers' own lists, directly


def matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


@dataclass
class Setup:
    gateway: RunningGateway
    recorder: Recorder
    # The paged server's own tool list, read directly.
    paged: list[str]


def result(steps: dict[str, Any], step: str) -> Any:
    entry = steps[step]
    assert "result" in entry, f"{step}: {entry}"
    return entry["result"]


def tools_of(steps: dict[str, Any]) -> list[str]:
    """The tools a `basic` run listed (every page followed by the driver)."""
    return [t["name"] for t in result(steps, "tools_list")["tools"]]


def lists_of(steps: dict[str, Any]) -> dict[str, list[str]]:
    """Everything a `basic` run listed (every page followed by the driver)."""
    templates = result(steps, "templates_list")["resourceTemplates"]
    return {
        "tools": tools_of(steps),
        "prompts": [p["name"] for p in result(steps, "prompts_list")["prompts"]],
        "resources": list(result(steps, "resources_list")),
        "templates": [t["uriTemplate"] for t in templates],
    }


def paged_command() -> list[str]:
    return [peer(PAGED_PYTHON).argv[0], str(PAGED_SERVER)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    require_thirdparty(SERVER_EVERYTHING)
    require_installed(*(peer(name) for name in CLIENTS.values()))
    reference = peer(REFERENCE)
    with ExitStack() as stack:
        url = stack.enter_context(running_thirdparty(SERVER_EVERYTHING, "streamable-http"))
        assert isinstance(url, str)
        paged = run_client(reference, paged_command(), "stdio")["steps"]
        recorder = stack.enter_context(recording(url.removesuffix("/mcp")))
        everything_route = (
            f"/mcp={recorder.url}/mcp,timeout=20,tools=allow:{'|'.join(TOOLS)},"
            f"prompts=deny:{'|'.join(HIDDEN_PROMPTS)},resources=deny:{'|'.join(HIDDEN_RESOURCES)}"
        )
        paged_route = (
            f"/paged=stdio:{shlex.join(paged_command())},timeout=20,"
            f"tools=allow:{'|'.join(PAGED_TOOLS)}"
        )
        unfiltered = f"/all={url},timeout=20"  # no policy, and not through the recorder
        gw = stack.enter_context(
            gateway(
                everything_route, paged_route, unfiltered, tmp_path=tmp_path_factory.mktemp("gw")
            )
        )
        yield Setup(gw, recorder, tools_of(paged))


def run(name: str, url: str) -> dict[str, Any]:
    client = peer(name)
    out = run_client(client, url, client.http_transport())
    steps: dict[str, Any] = out["steps"]
    assert "result" in steps.get("connect", {}), out
    return steps


def assert_unknown_tool(entry: dict[str, Any], name: str) -> None:
    """The refusal of a hidden tool as the client's SDK reports it: a JSON-RPC error,
    -32602, "Unknown tool: NAME" (an SDK may put its own prefix before the message)."""
    assert "error" in entry, entry
    assert entry["error"]["code"] == -32602, entry
    assert re.search(rf"Unknown tool: {re.escape(name)}\b", entry["error"]["message"]), entry


@pytest.mark.parametrize("revision", list(CLIENTS))
def test_clients_see_and_call_only_what_the_route_exposes(setup: Setup, revision: str) -> None:
    own = lists_of(run(CLIENTS[revision], setup.gateway.url("/all")))
    steps = run(CLIENTS[revision], setup.gateway.url("/mcp"))
    got = lists_of(steps)
    assert got["tools"] == [n for n in own["tools"] if matches(n, TOOLS)]
    assert got["prompts"] == [n for n in own["prompts"] if not matches(n, HIDDEN_PROMPTS)]
    assert got["resources"] == [u for u in own["resources"] if not matches(u, HIDDEN_RESOURCES)]
    assert got["templates"] == [u for u in own["templates"] if not matches(u, HIDDEN_RESOURCES)]
    # The rules did thin every list (a test whose rules hide nothing proves nothing).
    for kind in got:
        assert 0 < len(got[kind]) < len(own[kind]), kind
    assert_unknown_tool(steps["call_echo"], "echo")
    # Nothing hidden reached the server; what is exposed did (the recorder sees it).
    assert "echo" not in setup.recorder.calls("tools/call")
    assert setup.recorder.calls("tools/list")
    assert "greet" in setup.recorder.calls("prompts/get")


@pytest.mark.parametrize("revision", list(CLIENTS))
def test_a_paged_list_gives_every_exposed_tool_once(setup: Setup, revision: str) -> None:
    steps = run(CLIENTS[revision], setup.gateway.url("/paged"))
    tools = tools_of(steps)
    assert tools == [n for n in setup.paged if matches(n, PAGED_TOOLS)]
    assert len(set(tools)) == len(tools)
    assert len(setup.paged) == 30 and len(tools) == 15  # the server's pages were thinned
    assert "result" in steps["call_echo"], steps["call_echo"]  # exposed: it ran upstream
    assert_unknown_tool(steps["call_add"], "add")
    log = setup.gateway.log()
    assert "paged-server: tools/call echo" in log
    assert "paged-server: tools/call add" not in log
