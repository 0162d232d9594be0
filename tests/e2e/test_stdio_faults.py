"""A spawned stdio upstream misbehaving, seen through `gateway serve`: the probe
falls back when the child never answers it, a child that dies mid-call gives a
clear error and the next call works (a new child, a new session), and no child
outlives the gateway."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import aiohttp

from tests.e2e.fake_client import modern_headers, modern_request, post, text_of
from tests.e2e.gateway_proc import gateway

# A handshake-era server that never answers a method it does not know (as some
# legacy servers do), and whose `crash` tool kills it mid-call.
SERVER = r"""
import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg["method"]
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "fragile", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": n, "inputSchema": {"type": "object"}}
                            for n in ("whoami", "crash")]}
    elif method == "tools/call" and msg["params"]["name"] == "crash":
        with open(os.environ["CRASH_RUNS"], "a") as runs:
            runs.write("ran\n")  # its effect, before it dies
        os._exit(3)
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": str(os.getpid())}]}
    else:
        continue  # silence: the probe must fall back on its timeout
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


async def _call(http: aiohttp.ClientSession, url: str, tool: str) -> dict[str, object]:
    body = modern_request(1, "tools/call", {"name": tool, "arguments": {}})
    reply = await post(http, url, body, modern_headers("tools/call", tool), within=20)
    return reply.message


async def test_probe_fallback_crash_restart_and_no_orphans(tmp_path: Path) -> None:
    script = tmp_path / "fragile.py"
    script.write_text(SERVER)
    command = shlex.join([sys.executable, str(script)])
    route = f"/s=stdio:{command},probe_timeout=0.5,timeout=10"
    runs = tmp_path / "crash-runs"
    with gateway(route, tmp_path=tmp_path, env={**os.environ, "CRASH_RUNS": str(runs)}) as gw:
        url = gw.url("/s")
        async with aiohttp.ClientSession() as http:
            # The child never answers server/discover: legacy after the probe's timeout.
            first = await _call(http, url, "whoami")
            pid = int(text_of(first["result"]))  # type: ignore[arg-type]
            # The child dies mid-call: a clear error, promptly.
            crashed = await _call(http, url, "crash")
            error = crashed.get("error")
            assert isinstance(error, dict), crashed
            assert "exited" in str(error.get("message")), crashed
            # It ran, and was not sent again to a new child behind the client's back
            # (which would run it twice): the client is told it may have run.
            assert runs.read_text() == "ran\n"
            assert "may have run" in str(error.get("message")), crashed
            # The next call gets a new child (and a new upstream session).
            again = await _call(http, url, "whoami")
            new_pid = int(text_of(again["result"]))  # type: ignore[arg-type]
            assert new_pid != pid
        log = gw.log()
    assert "upstream era detected" in log
    # No child outlives the gateway.
    for child in (pid, new_pid):
        assert _gone(child), f"stdio child {child} outlived the gateway"


def _gone(pid: int) -> bool:
    """No such process, or only an unrelated one that recycled the pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    state = stat.rsplit(")", 1)[1].split()[0]
    ppid = int(stat.rsplit(")", 1)[1].split()[1])
    return state != "Z" and ppid != os.getpid()
