"""A load of wrk (C, one thread) calling ``tools/call echo``, for ``bench.lanes --pinned``.

    python -m bench.wrkload URL REVISION CONNECTIONS SECONDS   # pin it with taskset

The stdlib load (bench/stdload.py) costs about what the middle it measures costs,
so on two cores the load, the upstream and the middle contend and a lane's ratio
moves by 0.1-0.3 from round to round.  wrk answers a call in a small fraction of
that: with it and the Node upstream (bench/fastup.js) on one core and the middle
alone on the other, the middle is what limits, and calls per second are its
capacity.  Every answer is checked in wrk's Lua (HTTP 200, the echoed text back,
not a tool error), so a fast error never counts as a fast call; a cell with any
bad answer fails.  A 2025-11-25 load ``initialize``s one session first and sends
every call in it (ids from one counter, so unique in the session).  Prints one
JSON line: calls, sent, seconds, p50_ms, as bench.stdload does.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from bench.wire import LEGACY, MODERN, initialize, modern_call, modern_headers

TEXT = "wrk-echo"
ACCEPT = "application/json, text/event-stream"
LUA = """
wrk.method = "POST"
%(headers)s
local body = [[%(body)s]]
counter = 0
good, bad, first_bad = 0, 0, ""
local threads = {}
function setup(thread) table.insert(threads, thread) end
function request()
  counter = counter + 1
  return wrk.format(nil, nil, nil, string.format(body, counter))
end
function response(status, headers, answer)
  if status == 200 and answer:find('"text":"%(text)s"', 1, true)
      and not answer:find('"isError":true', 1, true) then
    good = good + 1
  else
    bad = bad + 1
    -- control and non-ASCII bytes as dots: %%q would break the one JSON line on them
    if bad == 1 then
      first_bad = (status .. " " .. answer:sub(1, 300)):gsub("[%%c\\128-\\255]", ".")
    end
  end
end
function done(summary, latency, requests)
  local g, b, first = 0, 0, ""
  for _, t in ipairs(threads) do
    g = g + t:get("good"); b = b + t:get("bad")
    if first == "" then first = t:get("first_bad") end
  end
  local e = summary.errors
  io.write(string.format(
    '{"requests":%%d,"good":%%d,"bad":%%d,"socket_errors":%%d,"us":%%d,"p50_us":%%d,'
    .. '"first_bad":%%q}\\n',
    summary.requests, g, b, e.connect + e.read + e.write + e.timeout,
    summary.duration, latency:percentile(50), first))
end
"""


def _post(url: str, message: dict[str, Any], headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(url, json.dumps(message).encode(), headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
        return response.status, response.headers.get("Mcp-Session-Id") or ""


def _headers(url: str, revision: str) -> dict[str, str]:
    """What every call carries; for a 2025-11-25 load, after opening its session."""
    if revision == MODERN:
        return modern_headers("tools/call", "echo")
    base = {"Content-Type": "application/json", "Accept": ACCEPT}
    status, session = _post(url, initialize(LEGACY), base)
    if status != 200 or not session:
        raise RuntimeError(f"initialize at {url}: HTTP {status}, session {session!r}")
    base |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}
    _post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, base)
    return base


def _body(revision: str) -> str:
    """The call, as bench.stdload sends it, with a ``%d`` for wrk's id."""
    if revision == MODERN:
        message = modern_call(0, "echo", {"text": TEXT}, {})
    else:
        params = {"name": "echo", "arguments": {"text": TEXT}}
        message = {"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": params}
    return json.dumps(message).replace('"id": 0', '"id": %d', 1)


def script(url: str, revision: str) -> str:
    headers = "\n".join(
        f'wrk.headers["{name}"] = "{value}"' for name, value in _headers(url, revision).items()
    )
    return LUA % {"headers": headers, "body": _body(revision), "text": TEXT}


def measure(url: str, revision: str, connections: int, seconds: float) -> dict[str, Any]:
    wrk = shutil.which("wrk")
    if wrk is None:
        raise RuntimeError("bench.wrkload needs wrk (Debian: apt-get install wrk)")
    with tempfile.TemporaryDirectory(prefix="wrkload-") as work:
        lua = Path(work) / "echo.lua"
        lua.write_text(script(url, revision))
        argv = [
            wrk,
            "-t1",
            f"-c{connections}",
            f"-d{max(1, round(seconds))}s",
            "-s",
            str(lua),
            url,
        ]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise RuntimeError(f"wrk {url}: {done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if figures["bad"] or figures["socket_errors"] or not figures["good"]:
        raise RuntimeError(f"wrk {url} {revision}: bad answers: {figures}")
    return {
        "calls": figures["good"],
        "sent": figures["requests"] + (2 if revision == LEGACY else 0),
        "seconds": figures["us"] / 1e6,
        "p50_ms": figures["p50_us"] / 1000,
    }


def main(argv: list[str]) -> int:
    url, revision, connections, seconds = argv[0], argv[1], int(argv[2]), float(argv[3])
    print(json.dumps(measure(url, revision, connections, seconds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
