"""Memory bounds measured, not asserted by the test suite (a 2-core machine shared
with other work makes byte counts noisy; the tests check the structural bounds).

    .venv/bin/python -m bench.memory

- **stdio stderr flood**: a child writes 50 MB of 1000-byte lines and one 8 MB
  line to stderr; the carrier reads and throttles it.  Reports how much the
  gateway process's RSS grew (it keeps no stderr: expect a few MB, not 58).
- **parked calls**: 5,000 abandoned calls parked in a table of 1,000; reports
  what the table holds (tracemalloc) after the first 1,000 and after all 5,000
  (expect about the same: the evicted calls are released), and the peak.
- **session churn**: 5,000 short-lived client sessions (2025-06-18: initialize, one
  ``tools/call``, DELETE), 16 at a time, through ``gateway serve`` to the demo upstream
  (each gets an upstream session of its own, ended with it).  Reports the gateway's RSS
  after a 500-session warm-up and at the end, and its open-session gauge at the end
  (expect 0 and an RSS that grows by little once warm).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tempfile
import textwrap
import tracemalloc
from pathlib import Path
from typing import Any

from gateway.bridge.rounds import ParkedCall, ParkingTable
from gateway.core import Answer, Ask, AskKind, Value
from gateway.upstream.carriers.stdio import StdioCarrier

FLOOD_MB = 50
_FLOODER = textwrap.dedent(
    r"""
    import json, sys
    for line in sys.stdin:
        msg = json.loads(line)
        chunk = ("e" * 999 + "\n") * 1024
        for _ in range(msg["params"]["mb"]):
            sys.stderr.write(chunk)
        sys.stderr.write("x" * (8 * 1024 * 1024) + "\nlast\n")
        sys.stderr.flush()
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}}), flush=True)
    """
)


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


async def stderr_flood() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "flooder.py"
        script.write_text(_FLOODER)
        carrier = StdioCarrier([sys.executable, "-u", str(script)], route="/bench")
        await carrier.start()
        try:
            before = _rss_kib()
            message = {"jsonrpc": "2.0", "id": 1, "method": "flood", "params": {"mb": FLOOD_MB}}
            exchange = await carrier.request(message, {})
            async with asyncio.timeout(120):
                _ = [m async for m in exchange.messages]
                # (an over-long line counts its first 8 KiB)
                while carrier.stderr_bytes < FLOOD_MB * 1000 * 1024 + 8 * 1024:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            grown = _rss_kib() - before
        finally:
            await carrier.close()
    return {"stderr_written_mb": FLOOD_MB + 8, "rss_growth_mb": round(grown / 1024, 1)}


async def parked_calls(bound: int = 1000, total: int = 5000) -> dict[str, Any]:
    table = ParkingTable(max_entries=bound, ttl=600.0, grace=0.01)
    ask = Ask(AskKind.ELICIT, {"message": "name?", "requestedSchema": {"type": "object"}})

    def park_one() -> None:
        parked = ParkedCall()
        future = parked.add_ask(ask)

        async def upstream() -> Value:
            answer: Answer = await future
            return Value({"answer": answer.result})

        parked.task = asyncio.ensure_future(upstream())
        table.park(parked)

    tracemalloc.start()
    try:
        for _ in range(bound):
            park_one()
        await asyncio.sleep(0)
        gc.collect()
        at_bound, _ = tracemalloc.get_traced_memory()
        for _ in range(total - bound):
            park_one()
        while table._reaping:  # the evicted calls' upstreams end
            await asyncio.wait(set(table._reaping))
        gc.collect()
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    await table.close()
    return {
        "bound": bound,
        "parked": total,
        "held_at_bound_kib": at_bound // 1024,
        "held_after_kib": after // 1024,
        "peak_kib": peak // 1024,
    }


CHURN = 5000
CHURN_WARMUP = 500
CHURN_PARALLEL = 16


async def _one_session(http: Any, url: str, n: int) -> None:
    """initialize, initialized, one tools/call, DELETE: a client's whole life."""
    accept = {"Accept": "application/json, text/event-stream"}
    opening = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "churn", "version": "1"},
        },
    }
    async with http.post(url, json=opening, headers=accept) as reply:
        await reply.read()
        assert reply.status == 200, reply.status
        sid = reply.headers["Mcp-Session-Id"]
    headers = {**accept, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with http.post(url, json=note, headers=headers) as reply:
        await reply.read()
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": f"n{n}"}},
    }
    async with http.post(url, json=call, headers=headers) as reply:
        body = await reply.text()
        assert reply.status == 200 and f"n{n}" in body, body[:200]
    async with http.delete(url, headers=headers) as reply:
        await reply.read()


async def _sessions_gauge(http: Any, base: str) -> float:
    async with http.get(base + "/metrics") as reply:
        text = await reply.text()
    lines = [line for line in text.splitlines() if line.startswith("gateway_sessions{")]
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines)


async def session_churn(total: int = CHURN) -> dict[str, Any]:
    import aiohttp

    from bench.procs import Lab

    lab = Lab()
    try:
        upstream = lab.upstream("legacy")
        gw = lab.gateway("gateway", upstream.url)
        base = gw.url.rsplit("/", 1)[0]
        counter = iter(range(total))
        before = gw.proc.rss_kib()
        async with aiohttp.ClientSession() as http:

            async def worker(stop: int) -> None:
                for n in counter:
                    await _one_session(http, gw.url, n)
                    if n + 1 >= stop:
                        return

            await asyncio.gather(*(worker(CHURN_WARMUP) for _ in range(CHURN_PARALLEL)))
            warm = gw.proc.rss_kib()
            await asyncio.gather(*(worker(total) for _ in range(CHURN_PARALLEL)))
            end = gw.proc.rss_kib()
            sessions = await _sessions_gauge(http, base)
        counts = upstream.counts()
        return {
            "sessions": total,
            "rss_before_mb": round(before / 1024, 1),
            "rss_after_warmup_mb": round(warm / 1024, 1),
            "rss_at_end_mb": round(end / 1024, 1),
            "open_sessions_at_end": sessions,
            "upstream_sessions_open_at_end": counts.get("sessions"),
            "upstream_requests": counts.get("requests"),
        }
    finally:
        lab.close()


async def main() -> None:
    print("stdio stderr flood:", await stderr_flood())
    print("parked calls:", await parked_calls())
    print("session churn:", await session_churn())


if __name__ == "__main__":
    asyncio.run(main())
