"""A stdio route runs one child per upstream session (callers never share one), or
one child for every caller when it is shared."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.e2e.fake_client import modern_headers, modern_request, post, text_of
from tests.e2e.gateway_proc import gateway

# A handshake-era stdio server in a dozen lines: its one tool says which process
# (and so which session) answered.
SERVER = r"""
import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "whoami", "version": "1"}}
    elif msg["method"] == "tools/list":
        result = {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]}
    elif msg["method"] == "tools/call":
        result = {"content": [{"type": "text", "text": str(os.getpid())}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                          "error": {"code": -32601, "message": "Method not found"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


async def _whoami(http: aiohttp.ClientSession, url: str, token: str) -> str:
    body = modern_request(1, "tools/call", {"name": "whoami", "arguments": {}})
    headers = {**modern_headers("tools/call", "whoami"), "Authorization": f"Bearer {token}"}
    reply = await post(http, url, body, headers)
    return text_of(reply.result)


@pytest.mark.parametrize("shared", [False, True])
async def test_one_child_per_caller_unless_shared(tmp_path: Path, shared: bool) -> None:
    script = tmp_path / "whoami.py"
    script.write_text(SERVER)
    command = shlex.join([sys.executable, str(script)])
    option = ",shared=true" if shared else ""
    route = f"/who=stdio:{command},version=2025-06-18{option}"
    with gateway(route, tmp_path=tmp_path) as gw:
        async with aiohttp.ClientSession() as http:
            alice = await _whoami(http, gw.url("/who"), "alice")
            bob = await _whoami(http, gw.url("/who"), "bob")
            again = await _whoami(http, gw.url("/who"), "alice")
    assert alice == again  # a caller keeps its session
    assert (alice != bob) is not shared


async def test_instances_are_targets_each_a_child_of_its_own(tmp_path: Path) -> None:
    """instances=N (issue 40): N children of the command as the route's targets; one
    caller's stateless calls spread over them."""
    script = tmp_path / "whoami.py"
    script.write_text(SERVER)
    command = shlex.join([sys.executable, str(script)])
    route = f"/who=stdio:{command},version=2025-06-18,shared=true,instances=2"
    with gateway(route, tmp_path=tmp_path) as gw:
        async with aiohttp.ClientSession() as http:
            pids = {await _whoami(http, gw.url("/who"), "alice") for _ in range(6)}
            async with http.get(gw.url("/readyz")) as response:
                ready = await response.json()
    assert len(pids) == 2, pids
    assert [t["target"] for t in ready["routes"]["/who"]["targets"]] == [
        "instance 1",
        "instance 2",
    ]


# A stateless (2026-07-28) stdio server: server/discover, then each request on its own.
STATELESS_SERVER = r"""
import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "server/discover":
        result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "w", "version": "1"}}}
    elif msg["method"] == "tools/list":
        result = {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]}
    elif msg["method"] == "tools/call":
        result = {"resultType": "complete",
                  "content": [{"type": "text", "text": str(os.getpid())}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                          "error": {"code": -32601, "message": "Method not found"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


@pytest.mark.parametrize("pinned", [False, True], ids=["probed", "pinned"])
async def test_a_stateless_stdio_server_answers_probed_or_pinned(
    tmp_path: Path, pinned: bool
) -> None:
    """Pinned to 2026-07-28 the probe is skipped: the child must still be started (it
    was not, and every call was "its process had exited")."""
    script = tmp_path / "stateless.py"
    script.write_text(STATELESS_SERVER)
    command = shlex.join([sys.executable, str(script)])
    route = f"/who=stdio:{command}" + (",version=2026-07-28" if pinned else "")
    with gateway(route, tmp_path=tmp_path) as gw:
        async with aiohttp.ClientSession() as http:
            alice = await _whoami(http, gw.url("/who"), "alice")
            bob = await _whoami(http, gw.url("/who"), "bob")
    assert alice.isdigit() and alice == bob  # one child: a stateless server keeps no session
