"""A load process of the standard library alone: threads, each on one keep-alive
``http.client`` connection, calling ``tools/call echo`` as fast as answers come.

    python -m bench.stdload URL REVISION CONNECTIONS SECONDS

A 2025-11-25 connection ``initialize``s once and calls in its session; a 2026-07-28
one sends stateless calls.  Each connection makes a few calls first (not counted);
then all of them call for SECONDS, each answer checked.  Prints one JSON line:
calls, seconds, and the latencies' p50 and p99 in ms.  Nothing here is the
gateway's or aiohttp's: the load is the same whatever it is pointed at (the reason
for it: an aiohttp client costs about what the gateway does, and measures itself).
"""

from __future__ import annotations

import http.client
import json
import statistics
import sys
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from bench.wire import LEGACY, check_echo, decode, initialize, modern_call, modern_headers

WARMUP = 20  # calls per connection before the window
JSON = "application/json"
ACCEPT = "application/json, text/event-stream"


class Caller:
    """One connection, one MCP client on it."""

    def __init__(self, url: str, revision: str) -> None:
        parts = urlsplit(url)
        self.path = parts.path
        self.conn = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port, timeout=30
        )
        self.revision = revision
        self.headers: dict[str, str] = {}
        self.calls = 0
        self.latencies: list[float] = []

    def _post(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, str, bytes, Any]:
        self.conn.request("POST", self.path, json.dumps(body), headers)
        response = self.conn.getresponse()
        data = response.read()
        return response.status, response.getheader("Content-Type", ""), data, response

    def open(self) -> None:
        if self.revision != LEGACY:
            return
        base = {"Content-Type": JSON, "Accept": ACCEPT}
        status, _, data, response = self._post(initialize(LEGACY), base)
        if status != 200:
            raise RuntimeError(f"initialize: HTTP {status}: {data[:200]!r}")
        session = response.getheader("Mcp-Session-Id") or ""
        self.headers = {**base, "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}, self.headers)

    def echo(self, i: int) -> None:
        text = f"load-{i}"
        if self.revision == LEGACY:
            params = {"name": "echo", "arguments": {"text": text}}
            body: dict[str, Any] = {"jsonrpc": "2.0", "id": i, "method": "tools/call"}
            body["params"] = params
            headers = self.headers
        else:
            body = modern_call(i, "echo", {"text": text}, {})
            headers = modern_headers("tools/call", "echo")
        status, content_type, data, _ = self._post(body, headers)
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {data[:200]!r}")
        check_echo(decode(data, content_type, i), text)

    def run(self, start: threading.Barrier, until: list[float]) -> None:
        for i in range(WARMUP):
            self.echo(i)
        start.wait()
        i = WARMUP
        while time.perf_counter() < until[0]:
            began = time.perf_counter()
            self.echo(i)
            self.latencies.append(time.perf_counter() - began)
            self.calls += 1
            i += 1


def measure(url: str, revision: str, connections: int, seconds: float) -> dict[str, Any]:
    callers = [Caller(url, revision) for _ in range(connections)]
    for caller in callers:
        caller.open()
    until = [0.0, 0.0]  # the window's end, and its start

    def go() -> None:  # run by the barrier once every caller has warmed up
        until[1] = time.perf_counter()
        until[0] = until[1] + seconds

    start = threading.Barrier(connections, action=go)
    threads = [threading.Thread(target=c.run, args=(start, until)) for c in callers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    window = time.perf_counter() - until[1]  # to the last answer of the window
    latencies = sorted(x for c in callers for x in c.latencies)
    return {
        "calls": sum(c.calls for c in callers),
        # Every request the process sent, warm-up and handshake included (CPU per call).
        "sent": sum(c.calls + WARMUP + (2 if revision == LEGACY else 0) for c in callers),
        "seconds": window,
        "p50_ms": statistics.median(latencies) * 1000 if latencies else None,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000 if latencies else None,
    }


def main(argv: list[str]) -> int:
    url, revision, connections, seconds = argv[0], argv[1], int(argv[2]), float(argv[3])
    print(json.dumps(measure(url, revision, connections, seconds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
