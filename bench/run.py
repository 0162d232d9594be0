"""The benchmark: start every process, run the rotating rounds, collect the figures.

Paths measured (``tools/call echo``, every answer checked):

  direct       a client straight to its upstream, same revision
  reference    the same client through bench.refproxy (bytes forwarded, nothing parsed)
  gateway      a client through `gateway serve`, same era or across eras

against two upstreams: the gateway's demo server (2025-11-25, handshake era) and
bench.upstreams' modern echo server (2026-07-28, stateless).  Each round runs
every path at every caller count; the order of the paths rotates from round
to round so drift (other load on the machine, warming caches) spreads evenly.
"""

from __future__ import annotations

import asyncio
import os
import platform
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bench.load import LoadResult, run_load
from bench.parking import park
from bench.procs import Lab, Mid, Proc, Sink, Upstream
from bench.wire import LEGACY, MODERN, LegacyClient, ModernClient


@dataclass(frozen=True)
class Config:
    rounds: int = 4
    callers: tuple[int, ...] = (1, 16, 64)
    calls_sequential: int = 300  # per path and round, 1 caller
    calls_concurrent: int = 1500  # per path and round, 16 or 64 callers
    warmup: int = 200
    phase_cap_s: float = 30.0  # no call of a cell starts after this
    call_timeout_s: float = 10.0
    gateway_log_level: str = "warning"
    uvloop: bool = False  # also the gateway on uvloop (bench-only launcher)
    otel: bool = False  # also the gateway with OpenTelemetry traces on, to a local sink
    park: int = 0  # abandoned greet_me calls after the rounds (0: none)

    @classmethod
    def quick(cls, **overrides: Any) -> Config:
        small = {"rounds": 2, "calls_sequential": 100, "calls_concurrent": 300, "warmup": 50}
        return cls(**{**small, **overrides})

    def calls(self, callers: int) -> int:
        return self.calls_sequential if callers == 1 else self.calls_concurrent


class OutsideSignal(RuntimeError):
    """A gateway was stopped by something other than the benchmark."""


@dataclass(frozen=True)
class PathSpec:
    key: str
    label: str
    client: str  # the client's revision
    upstream: str  # "legacy" (demo, 2025-11-25) or "modern" (2026-07-28 echo)
    via: str  # "direct", "ref", "gw" or "gw-uvloop"


def paths(uvloop: bool, otel: bool = False) -> list[PathSpec]:
    specs = [
        PathSpec(
            "direct-L", "2025-11-25 client -> legacy upstream, direct", LEGACY, "legacy", "direct"
        ),
        PathSpec("ref-L", "2025-11-25 client -> ref proxy -> legacy", LEGACY, "legacy", "ref"),
        PathSpec("gw-L-same", "2025-11-25 client -> gateway -> legacy", LEGACY, "legacy", "gw"),
        PathSpec("gw-L-cross", "2026-07-28 client -> gateway -> legacy", MODERN, "legacy", "gw"),
        PathSpec(
            "direct-M", "2026-07-28 client -> modern upstream, direct", MODERN, "modern", "direct"
        ),
        PathSpec("ref-M", "2026-07-28 client -> ref proxy -> modern", MODERN, "modern", "ref"),
        PathSpec("gw-M-same", "2026-07-28 client -> gateway -> modern", MODERN, "modern", "gw"),
        PathSpec("gw-M-cross", "2025-11-25 client -> gateway -> modern", LEGACY, "modern", "gw"),
    ]
    variants = [("-uv", "gateway[uvloop]", "gw-uvloop")] if uvloop else []
    variants += [("-otel", "gateway[otel]", "gw-otel")] if otel else []
    specs += [
        PathSpec(s.key + suffix, s.label.replace("gateway", label), s.client, s.upstream, via)
        for suffix, label, via in variants
        for s in specs
        if s.via == "gw"
    ]
    return specs


@dataclass
class Cell:
    """One path at one caller count, summed over the rounds."""

    ok: int = 0
    errors: int = 0
    elapsed_s: float = 0.0
    first_error: str = ""
    capped: bool = False
    latencies_s: list[float] = field(default_factory=list)
    round_rps: list[float] = field(default_factory=list)
    mid_cpu_s: float = 0.0
    upstream_cpu_s: float = 0.0
    connections: int = 0
    round_connections: list[int] = field(default_factory=list)
    upstream_requests: int = 0

    def add(self, result: LoadResult) -> None:
        self.ok += result.ok
        self.errors += result.errors
        self.elapsed_s += result.elapsed_s
        self.capped |= result.capped
        self.first_error = self.first_error or result.first_error
        self.latencies_s += result.latencies_s
        self.round_rps.append(round(result.throughput, 1))

    def percentile_ms(self, q: float) -> float:
        return LoadResult(latencies_s=self.latencies_s).percentile_ms(q)

    def summary(self) -> dict[str, Any]:
        per_call = 1e6 / self.ok if self.ok else float("nan")
        return {
            "calls": self.ok,
            "errors": self.errors,
            **({"first_error": self.first_error} if self.first_error else {}),
            "capped": self.capped,
            "throughput_rps": round(self.ok / self.elapsed_s, 1) if self.elapsed_s else 0.0,
            "round_rps": self.round_rps,
            "p50_ms": round(self.percentile_ms(50), 3),
            "p90_ms": round(self.percentile_ms(90), 3),
            "p99_ms": round(self.percentile_ms(99), 3),
            "mid_cpu_us_per_call": round(self.mid_cpu_s * per_call, 1),
            "upstream_cpu_us_per_call": round(self.upstream_cpu_s * per_call, 1),
            "upstream_connections_opened": self.connections,
            # Per round: between a path's rounds its idle connections outlive the
            # keep-alive (15 s) and are closed, so the sum counts those re-openings.
            "upstream_connections_per_round_max": max(self.round_connections, default=0),
            "upstream_requests_per_call": round(self.upstream_requests / self.ok, 3)
            if self.ok
            else None,
        }


@dataclass
class Bench:
    config: Config
    lab: Lab
    upstreams: dict[str, Upstream]
    mids: dict[tuple[str, str], Mid]  # (via, upstream kind) -> process
    specs: list[PathSpec]
    sink: Sink | None = None  # where the traced gateways (--otel) export
    clients: dict[str, LegacyClient | ModernClient] = field(default_factory=dict)
    cells: dict[tuple[str, int], Cell] = field(default_factory=dict)

    def url(self, spec: PathSpec) -> str:
        if spec.via == "direct":
            return self.upstreams[spec.upstream].url
        return self.mids[(spec.via, spec.upstream)].url

    def mid(self, spec: PathSpec) -> Proc | None:
        mid = self.mids.get((spec.via, spec.upstream))
        return mid.proc if mid else None

    async def cell(self, spec: PathSpec, callers: int, round_: int) -> None:
        upstream = self.upstreams[spec.upstream]
        mid = self.mid(spec)
        before = upstream.counts()
        mid_cpu = mid.cpu_seconds() if mid else 0.0
        up_cpu = upstream.proc.cpu_seconds()
        result = await run_load(
            self.clients[spec.key].echo,
            total=self.config.calls(callers),
            concurrency=callers,
            time_cap_s=self.config.phase_cap_s,
            call_timeout_s=self.config.call_timeout_s,
            first_id=1_000_000 * (round_ + 1) + 10_000 * callers,
        )
        after = upstream.counts()
        cell = self.cells.setdefault((spec.key, callers), Cell())
        cell.add(result)
        cell.mid_cpu_s += (mid.cpu_seconds() - mid_cpu) if mid else 0.0
        cell.upstream_cpu_s += upstream.proc.cpu_seconds() - up_cpu
        opened = after["connections"] - before["connections"]
        cell.connections += opened
        cell.round_connections.append(opened)
        cell.upstream_requests += after["requests"] - before["requests"]

    def check(self) -> None:
        for proc in self.lab.procs:
            proc.check_alive()
        for mid in self.mids.values():
            if mid.stopped_from_outside():
                raise OutsideSignal(
                    f"{mid.proc.name} was signalled from outside the benchmark (see "
                    f"{mid.proc.log_path}); its figures are void, run again"
                )


def start(config: Config, lab: Lab) -> Bench:
    upstreams = {kind: lab.upstream(kind) for kind in ("legacy", "modern")}
    mids: dict[tuple[str, str], Mid] = {}
    for kind, upstream in upstreams.items():
        mids[("ref", kind)] = lab.refproxy(f"ref-{kind}", upstream.url)
        mids[("gw", kind)] = lab.gateway(f"gateway-{kind}", upstream.url)
        if config.uvloop:
            mids[("gw-uvloop", kind)] = lab.gateway(
                f"gateway-uvloop-{kind}", upstream.url, uvloop=True
            )
    sink = lab.otlp_sink() if config.otel else None
    if sink is not None:
        for kind, upstream in upstreams.items():
            mids[("gw-otel", kind)] = lab.gateway(
                f"gateway-otel-{kind}", upstream.url, env=sink.traced()
            )
    return Bench(config, lab, upstreams, mids, paths(config.uvloop, config.otel), sink)


async def _rounds(bench: Bench) -> dict[str, Any]:
    config = bench.config
    limit = max(config.callers)
    sessions = []
    try:
        for spec in bench.specs:
            # The clients keep their connections between rounds (aiohttp's default
            # drops them after 15 s idle): new client connections are not measured.
            connector = aiohttp.TCPConnector(
                limit=limit, limit_per_host=limit, keepalive_timeout=3600
            )
            http = aiohttp.ClientSession(connector=connector)
            sessions.append(http)
            client: LegacyClient | ModernClient
            if spec.client == MODERN:
                client = ModernClient(http, bench.url(spec))
            else:
                client = LegacyClient(http, bench.url(spec))
                await client.initialize()  # once: every call reuses the session
            bench.clients[spec.key] = client
            warm = await run_load(
                client.echo,
                total=config.warmup,
                concurrency=16,
                time_cap_s=config.phase_cap_s,
                call_timeout_s=config.call_timeout_s,
            )
            if warm.errors:
                raise RuntimeError(f"{spec.label}: warm-up failed: {warm.first_error}")
        rss_start = {mid.proc.name: mid.proc.rss_kib() for mid in bench.mids.values()}
        started = time.perf_counter()
        for round_ in range(config.rounds):
            for callers in config.callers:
                shift = round_ % len(bench.specs)
                for spec in bench.specs[shift:] + bench.specs[:shift]:
                    await bench.cell(spec, callers, round_)
            bench.check()
        wall = time.perf_counter() - started
        rss_end = {mid.proc.name: mid.proc.rss_kib() for mid in bench.mids.values()}
        parking = None
        if config.park:
            parking = await park(
                bench.mids[("gw", "legacy")],
                bench.upstreams["legacy"],
                calls=config.park,
                concurrency=32,
                timeout_s=5.0,
            )
            bench.check()
    finally:
        for http in sessions:
            await http.close()
    return {
        "wall_s": round(wall, 1),
        "rss_kib": {name: [rss_start[name], rss_end[name]] for name in rss_start},
        **({"parking": parking} if parking else {}),
    }


def machine() -> dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "aiohttp": aiohttp.__version__,
        "kernel": platform.release(),
    }


def busy_cpu_s() -> float:
    """CPU time all processes on the machine have used (from /proc/stat), in seconds."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _loadavg() -> list[float]:
    with open("/proc/loadavg") as loadavg:
        return [float(x) for x in loadavg.read().split()[:3]]


def ratios(bench: Bench) -> list[dict[str, Any]]:
    """Every path at every caller count, with its ratios to the reference proxy."""
    rows = []
    for callers in bench.config.callers:
        for spec in bench.specs:
            row = {"path": spec.key, "label": spec.label, "callers": callers}
            row |= bench.cells[(spec.key, callers)].summary()
            ref = bench.cells[(f"ref-{spec.upstream[0].upper()}", callers)].summary()
            direct = bench.cells[(f"direct-{spec.upstream[0].upper()}", callers)].summary()
            if spec.via != "direct":
                for q in ("p50", "p99"):
                    added = row[f"{q}_ms"] - direct[f"{q}_ms"]
                    ref_added = ref[f"{q}_ms"] - direct[f"{q}_ms"]
                    row[f"{q}_added_ms"] = round(added, 3)
                    row[f"{q}_added_x_ref"] = round(added / ref_added, 2) if ref_added > 0 else None
                row["throughput_x_ref"] = (
                    round(row["throughput_rps"] / ref["throughput_rps"], 3)
                    if ref["throughput_rps"]
                    else None
                )
            rows.append(row)
    return rows


def tracing_cost(bench: Bench, sink: Sink) -> dict[str, Any]:
    """What traces cost (--otel): each gateway path's CPU per call and p50 with traces
    on against off, in the same rounds; and what reached the sink, once the traced
    gateways are stopped (which sends what they still queue)."""
    rows = []
    for callers in bench.config.callers:
        for spec in bench.specs:
            if spec.via != "gw":
                continue
            off = bench.cells[(spec.key, callers)].summary()
            on = bench.cells[(spec.key + "-otel", callers)].summary()
            added = on["mid_cpu_us_per_call"] - off["mid_cpu_us_per_call"]
            rows.append(
                {
                    "label": spec.label,
                    "callers": callers,
                    "cpu_us_off": off["mid_cpu_us_per_call"],
                    "cpu_us_on": on["mid_cpu_us_per_call"],
                    "cpu_us_added": round(added, 1),
                    "cpu_added_pct": round(added / off["mid_cpu_us_per_call"] * 100, 1),
                    "p50_ms_off": off["p50_ms"],
                    "p50_ms_on": on["p50_ms"],
                }
            )
    traced_calls = sum(
        cell.ok for (key, _), cell in bench.cells.items() if key.endswith("-otel")
    ) + bench.config.warmup * sum(1 for s in bench.specs if s.via == "gw-otel")
    for (via, _), mid in bench.mids.items():
        if via == "gw-otel":
            mid.proc.stop()
    received = sink.stats()
    per_call = round(received["spans"] / traced_calls, 2) if traced_calls else None
    sampler = os.environ.get("OTEL_TRACES_SAMPLER", "parentbased_always_on")
    if os.environ.get("OTEL_TRACES_SAMPLER_ARG"):
        sampler += f" {os.environ['OTEL_TRACES_SAMPLER_ARG']}"
    return {
        "rows": rows,
        "sink": received,
        "traced_calls": traced_calls,
        "spans_per_call": per_call,
        "sampler": sampler,
    }


def run(config: Config) -> dict[str, Any]:
    """Start everything, measure, stop everything (also on error or interrupt)."""
    lab = Lab(gateway_log_level=config.gateway_log_level)
    load_start = _loadavg()
    try:
        bench = start(config, lab)
        bench.check()
        busy_start = busy_cpu_s()
        own_start = sum(p.cpu_seconds() for p in lab.procs) + time.process_time()
        extra = asyncio.run(_rounds(bench))
        own_used = sum(p.cpu_seconds() for p in lab.procs) + time.process_time() - own_start
        busy = busy_cpu_s() - busy_start
        if bench.sink is not None:
            extra["tracing"] = tracing_cost(bench, bench.sink)
    finally:
        lab.close()
    return {
        "machine": machine(),
        "config": {**config.__dict__, "callers": list(config.callers)},
        "load_average_before": load_start,
        "load_average_after": _loadavg(),
        "cpu_s_used_by_benchmark": round(own_used, 1),
        # The machine's busy CPU time during the rounds minus what our processes used.
        "cpu_s_used_by_others": round(max(0.0, busy - own_used), 1),
        "rows": ratios(bench),
        **extra,
    }
