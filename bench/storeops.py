"""`python -m bench.storeops`: Redis commands per request, by kind, for two replicas
sharing one redis-server; and what that server takes on this machine (issue 41, item 5).

Two `gateway serve --cluster redis://...` replicas (A and B) in front of the demo
server (2025-11-25), routes `/mcp`, `/limited` (rate=100000/s: every call takes a
token) and `/shared` (ttl_ms, public: lists shared between replicas).  For each kind
of request, Redis's own counters (`CONFIG RESETSTAT`, then `INFO commandstats`) over
N requests, less what the replicas did meanwhile on their own (heartbeats, measured
idle first), divided by N:

- a stateless call (2026-07-28 `tools/call add` on A);
- an input_required round (greet_me on A, its retry on B: relayed to A);
- a session's request on another replica (2025-11-25 session opened on A, calls on B);
- a rate-limited call (on A);
- a shared list (`tools/list` on A and B in turn).

Then `redis-benchmark` (SET and GET, 50 clients, no pipelining) says what one
redis-server takes on this machine, and the sizing rule follows: calls per second per
shard = half that rate / commands per call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Any

import aiohttp
import orjson
import redis

from bench.procs import Lab, free_port
from bench.wire import LegacyClient, ModernClient

KINDS = ("stateless call", "input_required round", "session request, other replica")
KINDS += ("rate-limited call", "shared list")
IDLE_SECONDS = 5.0
# What the rate limits' script runs inside Redis (gateway/cluster/redis_buckets.py).
SCRIPTED = ("time", "hmget", "hset", "pexpire")
STATE_KEY = "storeops-bench-state-key-0123456789abcdef"


def _program(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"bench.storeops needs {name} (Debian: apt install redis-server)")
    return found


def _counts(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


async def _kind(kind: str, a: str, b: str, n: int, http: aiohttp.ClientSession) -> None:
    """``n`` requests of ``kind``: A's and B's base URLs."""
    if kind == "stateless call":
        client = ModernClient(http, a + "/mcp")
        for i in range(n):
            await client.call_tool(i, "add", {"a": 1, "b": 2})
    elif kind == "input_required round":
        first, retry = ModernClient(http, a + "/mcp"), ModernClient(http, b + "/mcp")
        for i in range(n):
            asked = (await first.call_tool(2 * i, "greet_me", {}))["result"]
            answers = {
                k: {"action": "accept", "content": {"name": "B"}} for k in asked["inputRequests"]
            }
            state = asked["requestState"]
            await retry.call_tool(
                2 * i + 1, "greet_me", {}, inputResponses=answers, requestState=state
            )
    elif kind == "session request, other replica":
        opener = LegacyClient(http, a + "/mcp")
        await opener.initialize()
        other = LegacyClient(http, b + "/mcp")
        other.session_headers = opener.session_headers
        for i in range(n):
            await other.echo(i)
    elif kind == "rate-limited call":
        client = ModernClient(http, a + "/limited")
        for i in range(n):
            await client.call_tool(i, "add", {"a": 1, "b": 2})
    else:
        for i in range(n):
            client = ModernClient(http, (a if i % 2 else b) + "/shared")
            message = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/list",
                "params": {"_meta": client.meta},
            }
            await client.post(message, client.headers("tools/list"))


def _row(counts: dict[str, int], idle: float, n: int) -> dict[str, Any]:
    """Per request: commands sent (a script's run is one) and commands executed (those
    the script runs counted too), less the replicas' own meanwhile."""
    for own in ("config|resetstat", "script|load"):  # the bench's, and the first use's
        counts.pop(own, None)
    executed = sum(counts.values())
    inside = sum(counts.get(c, 0) for c in SCRIPTED) if counts.get("evalsha") else 0
    return {
        "sent": round(max(0.0, executed - inside - idle) / n, 2),
        "executed": round(max(0.0, executed - idle) / n, 2),
        "commands": counts,
    }


def _benchmark(port: int) -> dict[str, float]:
    done = subprocess.run(
        [
            _program("redis-benchmark"),
            "-p",
            str(port),
            "-q",
            "-n",
            "100000",
            "-c",
            "50",
            "-t",
            "set,get",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    rates = {}
    for line in done.stdout.replace("\r", "\n").splitlines():
        match = re.match(r"(SET|GET): ([\d.]+) requests per second", line.strip())
        if match:
            rates[match.group(1)] = float(match.group(2))
    return rates


async def run(n: int) -> dict[str, Any]:
    lab = Lab()
    redis_port = free_port()
    redis_argv = [_program("redis-server"), "--port", str(redis_port), "--bind", "127.0.0.1"]
    lab._spawn("redis", [*redis_argv, "--save", "", "--appendonly", "no"])
    client = redis.Redis(port=redis_port)
    try:
        await _until(client.ping)
        demo_port = free_port()
        demo = [sys.executable, "-m", "gateway", "demo", "--listen", f"127.0.0.1:{demo_port}"]
        lab._spawn("demo", demo)
        upstream = f"http://127.0.0.1:{demo_port}/mcp"
        await _until(lambda: _reachable(demo_port))
        extra = [
            *("--cluster", f"redis://127.0.0.1:{redis_port}/0"),
            *("--route", f"/limited={upstream},rate=100000/s"),
            *("--route", f"/shared={upstream},ttl_ms=600000,cache_scope=public"),
        ]
        env = {"GATEWAY_STATE_KEY": STATE_KEY}
        a = lab.gateway("replica-a", upstream, extra=extra, env=env).url.removesuffix("/mcp")
        b = lab.gateway("replica-b", upstream, extra=extra, env=env).url.removesuffix("/mcp")
        client.config_resetstat()
        await asyncio.sleep(IDLE_SECONDS)  # what the replicas do on their own, measured
        idle = sum(_counts(client).values()) / IDLE_SECONDS
        rows = {}
        async with aiohttp.ClientSession() as http:
            await _kind("shared list", a, b, 2, http)  # warm: verdicts, pools, lists
            for kind in KINDS:
                client.config_resetstat()
                started = time.monotonic()
                await _kind(kind, a, b, n, http)
                spent = time.monotonic() - started
                rows[kind] = _row(_counts(client), idle * spent, n)
        return {
            "n": n,
            "idle_ops_per_s": round(idle, 2),
            "kinds": rows,
            "redis": _benchmark(redis_port),
        }
    finally:
        client.close()
        lab.close()


def _reachable(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def _until(check: Any, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            if check():
                return
        except (redis.ConnectionError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("a process of the bench did not start")
        await asyncio.sleep(0.1)


def render(figures: dict[str, Any]) -> str:
    capacity = min(figures["redis"].values()) if figures["redis"] else float("nan")
    lines = [
        f"{figures['n']} requests of each kind, two replicas; idle: {figures['idle_ops_per_s']} "
        "commands/s (heartbeats)",
        "",
        f"{'kind':<32} {'sent':>5} {'executed':>9}  {'calls/s per shard':>18}  commands",
    ]
    for kind, row in figures["kinds"].items():
        per = row["executed"]
        shard = f"{0.5 * capacity / per:,.0f}" if per >= 0.05 else "no store work"
        commands = ", ".join(f"{k} {v}" for k, v in sorted(row["commands"].items()))
        lines.append(f"{kind:<32} {row['sent']:>5.2f} {per:>9.2f}  {shard:>18}  {commands}")
    lines += ["", f"redis-server on this machine (redis-benchmark, 50 clients): {figures['redis']}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.storeops")
    parser.add_argument("-n", type=int, default=200, help="requests of each kind")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    figures = asyncio.run(run(args.n))
    print(orjson.dumps(figures).decode() if args.json else render(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
