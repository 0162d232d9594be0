"""`python -m bench.cluster`: what cluster mode costs and what `--workers 2` buys, on loopback.

(a) **Relay latency.** redis-server, bench.upstreams' modern echo server and two
    `gateway serve --cluster` replicas sharing that Redis.  A 2025-11-25 client
    opens a session on replica A (its owner) and calls ``tools/call echo`` one
    call at a time, either to A itself (local) or to replica B, which relays
    each request to A (relayed).  Same calls per path, rotating rounds.
(b) **Throughput of `--workers 2`.** The same echo upstream behind one
    `gateway serve` process and behind `gateway serve --workers 2` (two
    processes sharing the port with SO_REUSEPORT); a 2026-07-28 client (no
    session, so nothing is relayed) at 16 concurrent callers, rotating rounds.

Every process is started by bench.procs (own process group, stopped on exit);
all traffic is on 127.0.0.1, free ports.  Prints a table (``--json``: JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp

from bench.load import LoadResult, run_load
from bench.procs import HOST, Lab, Proc, Upstream, _wait_http, _wait_port, cpu_seconds, free_port
from bench.run import _loadavg, busy_cpu_s, machine
from bench.wire import LegacyClient, ModernClient

STATE_KEY = "bench-cluster-state-key-0123456789abcdef0123456789"


@dataclass(frozen=True)
class Config:
    rounds: int = 4
    calls_sequential: int = 300  # (a): per path and round, 1 caller
    calls_concurrent: int = 1500  # (b): per path and round
    callers: int = 16
    warmup: int = 200
    phase_cap_s: float = 60.0
    call_timeout_s: float = 10.0

    @classmethod
    def quick(cls) -> Config:
        return cls(rounds=2, calls_sequential=100, calls_concurrent=300, warmup=50)


@dataclass
class Cell:
    """One path, summed over the rounds; CPU of the gateway processes it exercised."""

    label: str
    procs: list[Proc]
    callers: int
    latencies_s: list[float] = field(default_factory=list)
    ok: int = 0
    errors: int = 0
    first_error: str = ""
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    round_rps: list[float] = field(default_factory=list)

    def cpu_now(self) -> float:
        return sum(_tree_cpu_seconds(proc.pid) for proc in self.procs)

    def add(self, result: LoadResult, cpu_s: float) -> None:
        self.latencies_s += result.latencies_s
        self.ok += result.ok
        self.errors += result.errors
        self.first_error = self.first_error or result.first_error
        self.elapsed_s += result.elapsed_s
        self.cpu_s += cpu_s
        self.round_rps.append(round(result.throughput, 1))

    def summary(self) -> dict[str, Any]:
        pct = LoadResult(latencies_s=self.latencies_s).percentile_ms
        return {
            "label": self.label,
            "callers": self.callers,
            "calls": self.ok,
            "errors": self.errors,
            **({"first_error": self.first_error} if self.first_error else {}),
            "throughput_rps": round(self.ok / self.elapsed_s, 1) if self.elapsed_s else 0.0,
            "round_rps": self.round_rps,
            "p50_ms": round(pct(50), 3),
            "p99_ms": round(pct(99), 3),
            "gateway_cpu_us_per_call": round(1e6 * self.cpu_s / self.ok, 1) if self.ok else None,
        }


def _tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and its children (the workers of `--workers`)."""
    total = cpu_seconds(pid)
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        total += cpu_seconds(int(child))
    return total


def _serve(lab: Lab, name: str, port: int, upstream: str, *extra: str) -> Proc:
    argv = [sys.executable, "-m", "gateway", "serve", "--listen", f"{HOST}:{port}"]
    argv += ["--route", f"/mcp={upstream}", "--log-level", "warning", "--loop", "asyncio"]
    argv += ["--drain-timeout", "1", *extra]
    return lab._spawn(name, argv)


def _ready(url: str, proc: Proc, times: int) -> None:
    """/readyz answers 200 ``times`` in a row, each on a new connection (any worker)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for _ in range(times):
        _wait_http(url, 30.0, proc)
        with opener.open(url, timeout=5):
            pass


@dataclass
class Lab2:
    lab: Lab
    upstream: Upstream
    replicas: list[tuple[Proc, str]]  # (a): process, /mcp URL
    single: tuple[Proc, str]  # (b)
    workers: tuple[Proc, str]  # (b)


def start(lab: Lab) -> Lab2:
    redis_server = shutil.which("redis-server") or shutil.which(
        "redis-server", path="/usr/sbin:/usr/bin"
    )
    if redis_server is None:
        raise SystemExit("redis-server is not installed (scripts/test installs it)")
    os.environ["GATEWAY_STATE_KEY"] = STATE_KEY  # every replica and worker: the same key
    redis_port = free_port()
    redis = lab._spawn(
        "redis",
        [
            *(redis_server, "--port", str(redis_port), "--bind", HOST, "--save", ""),
            *("--appendonly", "no", "--dir", str(lab.workdir)),
        ],
    )
    _wait_port(redis_port, 10.0, redis)
    upstream = lab.upstream("modern")
    replicas = []
    for name in ("replica-a", "replica-b"):
        port = free_port()
        cluster = ("--cluster", f"redis://{HOST}:{redis_port}/0")
        proc = _serve(lab, name, port, upstream.url, *cluster)
        _ready(f"http://{HOST}:{port}/readyz", proc, 1)
        replicas.append((proc, f"http://{HOST}:{port}/mcp"))
    port = free_port()
    single = _serve(lab, "single", port, upstream.url)
    _ready(f"http://{HOST}:{port}/readyz", single, 1)
    wport = free_port()
    workers = _serve(lab, "workers-2", wport, upstream.url, "--workers", "2")
    _ready(f"http://{HOST}:{wport}/readyz", workers, 10)
    return Lab2(
        lab,
        upstream,
        replicas,
        (single, f"http://{HOST}:{port}/mcp"),
        (workers, f"http://{HOST}:{wport}/mcp"),
    )


async def _measure(config: Config, labs: Lab2) -> dict[str, Any]:
    (proc_a, url_a), (proc_b, url_b) = labs.replicas
    both = [proc_a, proc_b]
    seq = {"calls": config.calls_sequential, "callers": 1}
    par = {"calls": config.calls_concurrent, "callers": config.callers}
    https: list[aiohttp.ClientSession] = []

    def http() -> aiohttp.ClientSession:
        limit = config.callers
        connector = aiohttp.TCPConnector(limit=limit, keepalive_timeout=3600)
        https.append(aiohttp.ClientSession(connector=connector))
        return https[-1]

    try:
        local = LegacyClient(http(), url_a)
        await local.initialize()  # the session is owned by replica A
        relayed = LegacyClient(http(), url_b)
        relayed.session_headers = local.session_headers
        single = ModernClient(http(), labs.single[1])
        workers = ModernClient(http(), labs.workers[1])
        paths = [
            (Cell("(a) session on A, calls sent to A (local)", both, 1), local.echo, seq),
            (Cell("(a) session on A, calls sent to B (relayed)", both, 1), relayed.echo, seq),
            (Cell("(b) gateway serve, one process", [labs.single[0]], config.callers),
             single.echo, par),
            (Cell("(b) gateway serve --workers 2", [labs.workers[0]], config.callers),
             workers.echo, par),
        ]  # fmt: skip
        for cell, call, _ in paths:
            warm = await run_load(
                call,
                total=config.warmup,
                concurrency=4,
                time_cap_s=config.phase_cap_s,
                call_timeout_s=config.call_timeout_s,
            )
            if warm.errors:
                raise RuntimeError(f"{cell.label}: warm-up failed: {warm.first_error}")
        started = time.perf_counter()
        for round_ in range(config.rounds):
            shift = round_ % len(paths)
            for cell, call, shape in paths[shift:] + paths[:shift]:
                cpu = cell.cpu_now()
                result = await run_load(
                    call,
                    total=shape["calls"],
                    concurrency=shape["callers"],
                    time_cap_s=config.phase_cap_s,
                    call_timeout_s=config.call_timeout_s,
                    first_id=1_000_000 * (round_ + 1),
                )
                cell.add(result, cell.cpu_now() - cpu)
            for proc in labs.lab.procs:
                proc.check_alive()
        wall = time.perf_counter() - started
    finally:
        for session in https:
            await session.close()
    return {"wall_s": round(wall, 1), "rows": [cell.summary() for cell, _, _ in paths]}


def run(config: Config) -> dict[str, Any]:
    lab = Lab()
    load_before = _loadavg()
    try:
        labs = start(lab)
        busy = busy_cpu_s()
        ours = sum(_tree_cpu_seconds(p.pid) for p in lab.procs) + time.process_time()
        measured = asyncio.run(_measure(config, labs))
        ours = sum(_tree_cpu_seconds(p.pid) for p in lab.procs) + time.process_time() - ours
        busy = busy_cpu_s() - busy
    finally:
        lab.close()
    return {
        "machine": machine(),
        "config": config.__dict__,
        "load_average_before": load_before,
        "load_average_after": _loadavg(),
        "cpu_s_used_by_benchmark": round(ours, 1),
        "cpu_s_used_by_others": round(max(0.0, busy - ours), 1),
        **measured,
    }


def render(report: dict[str, Any]) -> str:
    m, c = report["machine"], report["config"]
    lines = [
        f"gateway cluster mode: {m['cpus']} CPUs ({m['cpu_model']}), Python {m['python']}, "
        f"aiohttp {m['aiohttp']}; {c['rounds']} rotating rounds, per path and round "
        f"{c['calls_sequential']} calls at 1 caller (a), {c['calls_concurrent']} at "
        f"{c['callers']} callers (b)",
        f"load average before {report['load_average_before']}, after "
        f"{report['load_average_after']}; CPU used by other processes during the rounds "
        f"{report['cpu_s_used_by_others']} s (ours {report['cpu_s_used_by_benchmark']} s, "
        f"{report['wall_s']} s wall)",
        "gwCPU: us of CPU per call in the gateway processes of the path (both replicas for (a))",
        "",
        f"{'path':<46} {'callers':>7} {'calls':>6} {'err':>3} {'req/s':>6} {'p50ms':>6} "
        f"{'p99ms':>7} {'gwCPU':>6}",
    ]
    for row in report["rows"]:
        lines.append(
            f"{row['label']:<46} {row['callers']:>7} {row['calls']:>6} {row['errors']:>3} "
            f"{row['throughput_rps']:>6.0f} {row['p50_ms']:>6.2f} {row['p99_ms']:>7.2f} "
            f"{row['gateway_cpu_us_per_call'] or 0:>6.0f}"
            + (f"  ! {row['first_error'][:80]}" if row.get("first_error") else "")
        )
    rows = report["rows"]
    lines += [
        "",
        f"relay adds {rows[1]['p50_ms'] - rows[0]['p50_ms']:.2f} ms at p50, "
        f"{rows[1]['p99_ms'] - rows[0]['p99_ms']:.2f} ms at p99; --workers 2 gives "
        f"{rows[3]['throughput_rps'] / max(rows[2]['throughput_rps'], 1e-9):.2f}x the "
        "throughput of one process",
    ]
    return "\n".join(lines)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through run()'s cleanup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cluster",
        description="Relay latency between two replicas; throughput of --workers 2.",
    )
    parser.add_argument("--quick", action="store_true", help="2 rounds, small counts")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--rounds", type=int, help="rotating rounds (default 4, quick 2)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    config = Config.quick() if args.quick else Config()
    if args.rounds:
        config = Config(**{**config.__dict__, "rounds": args.rounds})
    print("starting redis-server, an upstream and gateways ...", file=sys.stderr, flush=True)
    report = run(config)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
