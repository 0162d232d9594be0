"""A question a stdio server asks on `notifications/initialized` reaches the client even
when the server only sends it once the gateway's next message is read.

server-filesystem asks `roots/list` on `initialized` and answers tools from what it
knows meanwhile.  Sent straight after `initialized`, the first call would be in flight
when the question comes, would be taken as its owner, and would end (the tool answered
at once) with the question never put to anyone.  The gateway settles a new stdio
session with a ping first: the question arrives before the ping's answer, is held, and
the first call asks it.  The server below sends its question only after reading the
next message, the latest it could, so the test does not depend on timing.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import aiohttp

from tests.e2e.fake_client import modern_headers, post, text_of
from tests.e2e.gateway_proc import gateway
from tests.e2e.sdk_peers import modern_call

SERVER = r"""
import json, sys

def send(message):
    print(json.dumps(message), flush=True)

roots, ask_next, seen = None, False, []
for line in sys.stdin:
    msg = json.loads(line)
    seen.append(msg.get("method") or ("answer", msg.get("id")))
    if msg.get("method") == "notifications/initialized":
        ask_next = True  # asked late: once the next message is read
        continue
    if "method" not in msg:
        if msg.get("id") == "roots-1":
            roots = [r["uri"] for r in msg.get("result", {}).get("roots", [])]
        continue
    if ask_next:
        ask_next = False
        send({"jsonrpc": "2.0", "id": "roots-1", "method": "roots/list"})
    if "id" not in msg:
        continue
    method = msg["method"]
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "late-asker", "version": "1"}}
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [{"name": "roots", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": json.dumps({"roots": roots, "seen": seen})}]}
    else:
        send({"jsonrpc": "2.0", "id": msg["id"],
              "error": {"code": -32601, "message": "Method not found"}})
        continue
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
"""

ROOTS_CAPS = {"roots": {"listChanged": True}}
ROOT = "file:///srv/project"


async def _call(http: aiohttp.ClientSession, url: str, **kwargs: object) -> dict[str, object]:
    headers = {**modern_headers("tools/call", "roots"), "Authorization": "Bearer alice"}
    reply = await post(http, url, modern_call("roots", {}, ROOTS_CAPS, **kwargs), headers)  # type: ignore[arg-type]
    assert reply.status == 200, reply.text
    return reply.result


async def test_a_question_sent_on_initialized_reaches_the_first_call(tmp_path: Path) -> None:
    script = tmp_path / "late_asker.py"
    script.write_text(SERVER)
    route = f"/fs=stdio:{shlex.join([sys.executable, str(script)])},version=2025-06-18"
    with gateway(route, tmp_path=tmp_path) as gw:
        async with aiohttp.ClientSession() as http:
            first = await _call(http, gw.url("/fs"))
            assert first.get("resultType") == "input_required", first
            requests = first["inputRequests"]
            assert isinstance(requests, dict) and len(requests) == 1, first
            ((key, asked),) = requests.items()
            assert asked["method"] == "roots/list", asked
            answer = {key: {"roots": [{"uri": ROOT, "name": "project"}]}}
            second = await _call(http, gw.url("/fs"), responses=answer, state=first["requestState"])
    assert second.get("resultType") == "complete", second
    told = json.loads(text_of(second))
    assert told["roots"] == [ROOT], told
    # What the server read, in order: the answer came before the call it served.
    assert told["seen"] == [
        "initialize",
        "notifications/initialized",
        "ping",
        ["answer", "roots-1"],
        "tools/call",
    ], told
