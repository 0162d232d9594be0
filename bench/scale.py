"""`python -m bench.scale`: throughput as `gateway serve --workers N` grows, against a
reference proxy run the same way.

    .venv/bin/python -m bench.scale            # worker counts and process counts from the cores
    .venv/bin/python -m bench.scale --quick    # one round, fewer calls
    .venv/bin/python -m bench.scale --json
    .venv/bin/python -m bench.scale --workers 1,2,4 --loaders 4 --upstreams 4

Worker counts are 1, 2, 4, ... up to ``os.cpu_count()`` (and the count itself).
So that neither side limits the gateway:

- **upstreams**: ``--upstreams`` processes of bench.upstreams' modern echo server on
  one port (SO_REUSEPORT: the kernel spreads connections), and as many demo
  servers (2025-11-25), one per route (``/l0``, ``/l1``, ...: a handshake-era
  session must stay on the process that made it);
- **load**: ``--loaders`` processes of `bench.scaleload` (raw HTTP/1.1 on httptools,
  uvloop), ``16 x`` the largest worker count of connections in all, one caller
  each; a 2025-11-25 client opens a session per connection (many clients);
- **reference proxy**: N processes of `bench.refproxy` sharing a port, for each N,
  with the same routes: the ratio is to a proxy that parses nothing, run the same way.

Rounds rotate the order of the cells (direct, reference proxy and gateway at
each worker count, for each path).  Per cell: throughput, p50 / p99 latency
(added: less the direct call's), CPU per call of the gateway's processes, and
the cores each side used (gateway, load, upstreams, the whole machine).
Throughput is the median of the rounds'; efficiency at N is throughput(N) /
(N x throughput(1)).  When the machine has too few cores for the gateway, the
load and the upstreams together, the run says so: its ratios then measure the
machine, not the gateway.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from bench.idle import raise_fd_limit
from bench.load import LoadResult
from bench.procs import HOST, Lab, Proc, _wait_http, cpu_seconds, free_port
from bench.run import _loadavg, busy_cpu_s, machine
from bench.wire import LEGACY, MODERN

CALLERS_PER_WORKER = 16


def worker_counts(cpus: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to ``cpus``, and ``cpus`` itself."""
    counts = [1]
    while counts[-1] * 2 <= cpus:
        counts.append(counts[-1] * 2)
    if counts[-1] != cpus and cpus > 1:
        counts.append(cpus)
    return tuple(counts)


@dataclass(frozen=True)
class Config:
    workers: tuple[int, ...]
    loaders: int
    upstreams: int
    rounds: int = 3
    calls: int = 10_000  # per cell (all loaders together)
    warmup: int = 5  # calls per connection when it is opened
    time_cap_s: float = 20.0
    loop: str = "asyncio"
    paths: tuple[str, ...] = ("M-same", "M-cross", "L-cross")

    @classmethod
    def for_machine(cls, cpus: int, **overrides: Any) -> Config:
        base = {
            "workers": worker_counts(cpus),
            "loaders": max(2, cpus // 2),
            "upstreams": max(2, cpus // 2),
        }
        return cls(**{**base, **overrides})

    @property
    def callers(self) -> int:
        return CALLERS_PER_WORKER * max(self.workers)


@dataclass(frozen=True)
class PathSpec:
    key: str
    label: str
    revision: str  # the client's
    upstream: str  # "modern" (echo, SO_REUSEPORT) or "legacy" (demo servers, one per route)


PATHS = {
    "M-same": PathSpec("M-same", "2026-07-28 client -> gateway -> modern", MODERN, "modern"),
    "M-cross": PathSpec("M-cross", "2025-11-25 client -> gateway -> modern", LEGACY, "modern"),
    "L-cross": PathSpec("L-cross", "2026-07-28 client -> gateway -> legacy", MODERN, "legacy"),
    "L-same": PathSpec("L-same", "2025-11-25 client -> gateway -> legacy", LEGACY, "legacy"),
}
# What the direct and reference cells of each upstream speak: the upstream's own revision.
NATIVE = {"modern": MODERN, "legacy": LEGACY}


# ---------------------------------------------------------------------- load processes


@dataclass
class Loader:
    """A `bench.scaleload` process: commands on its stdin, answers on its stdout."""

    proc: Proc
    process: subprocess.Popen[str]

    @classmethod
    def start(cls, lab: Lab, name: str) -> Loader:
        log_path = lab.workdir / f"{name}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "bench.scaleload"],
                cwd=Path(__file__).resolve().parents[1],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                start_new_session=True,
                env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()},
            )
        proc = Proc(name, process, log_path)  # type: ignore[arg-type]
        lab.procs.append(proc)
        return cls(proc, process)

    def send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.proc.check_alive()
            raise RuntimeError(f"{self.proc.name} said nothing")
        answer: dict[str, Any] = json.loads(line)
        if "failed" in answer:
            raise RuntimeError(f"{self.proc.name}: {answer['failed']}")
        return answer


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its children (a gateway's workers)."""
    total = cpu_seconds(pid)
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return total
    for child in children:
        try:
            total += cpu_seconds(int(child))
        except (OSError, ValueError):
            continue  # gone meanwhile
    return total


# ---------------------------------------------------------------------------- the lab


@dataclass
class Mids:
    """The processes a cell's calls go through, and the URLs of each upstream kind."""

    procs: list[Proc]
    urls: dict[str, list[str]]  # upstream kind -> URLs (several: one per legacy route)

    def cpu(self) -> float:
        return sum(tree_cpu(proc.pid) for proc in self.procs)


@dataclass
class Setup:
    config: Config
    lab: Lab
    upstreams: list[Proc]
    direct: Mids
    refs: dict[int, Mids]
    gateways: dict[int, Mids]
    loaders: list[Loader]
    legacy_urls: list[str] = field(default_factory=list)


def _legacy_routes(urls: list[str]) -> list[str]:
    return [f"/l{n}={url}" for n, url in enumerate(urls)]


def start(config: Config, lab: Lab) -> Setup:
    modern_port = free_port()
    modern = [
        lab.upstream("modern", port=modern_port, name=f"upstream-modern-{n}")
        for n in range(config.upstreams)
    ]
    legacy = [lab.upstream("legacy", name=f"upstream-legacy-{n}") for n in range(config.upstreams)]
    modern_url = modern[0].url
    legacy_urls = [u.url for u in legacy]
    upstreams = [u.proc for u in modern + legacy]
    direct = Mids([], {"modern": [modern_url], "legacy": legacy_urls})
    routes = _legacy_routes(legacy_urls)
    refs: dict[int, Mids] = {}
    gateways: dict[int, Mids] = {}
    uvloop = config.loop == "uvloop"
    for n in config.workers:
        port = free_port()
        extra = [a for route in routes for a in ("--route", route)]
        extra += ["--reuse-port"] + (["--uvloop"] if uvloop else [])
        procs = [
            lab.refproxy(f"ref-{n}-{i}", modern_url, port=port, extra=extra).proc for i in range(n)
        ]
        base = f"http://{HOST}:{port}"
        refs[n] = Mids(procs, _mid_urls(base, "/mcp", len(legacy_urls)))
        gateways[n] = _gateway(config, lab, n, modern_url, routes)
    loaders = [Loader.start(lab, f"loader-{n}") for n in range(config.loaders)]
    return Setup(config, lab, upstreams, direct, refs, gateways, loaders, legacy_urls)


def _mid_urls(base: str, modern_path: str, legacy_count: int) -> dict[str, list[str]]:
    return {
        "modern": [base + modern_path],
        "legacy": [f"{base}/l{n}" for n in range(legacy_count)],
    }


def _gateway(config: Config, lab: Lab, workers: int, modern_url: str, routes: list[str]) -> Mids:
    port = free_port()
    big = str(20 * config.callers + 1000)
    env = {
        # Connections kept between cells (a keep-alive connection idle past the header
        # timeout is closed; the load would then open it again, and a session with it).
        "GATEWAY_HEADER_TIMEOUT": "3600",
        **{
            f"GATEWAY_{name}": big
            for name in (
                "MAX_INFLIGHT",
                "MAX_INFLIGHT_PER_PRINCIPAL",
                "MAX_SESSIONS",
                "MAX_SESSIONS_PER_PRINCIPAL",
            )
        },
    }
    extra = ["--route", f"/m={modern_url}"]
    for route in routes:
        extra += ["--route", route]
    if workers > 1:
        extra += ["--workers", str(workers)]
    mid = lab.gateway(
        f"gateway-{workers}",
        modern_url,
        uvloop=config.loop == "uvloop",
        extra=extra,
        env=env,
        port=port,
        timeout=60.0,
    )
    base = f"http://{HOST}:{port}"
    _ready(base + "/readyz", mid.proc, 3 * workers)
    return Mids([mid.proc], _mid_urls(base, "/m", len(routes)))


def _ready(url: str, proc: Proc, times: int) -> None:
    """/readyz answers 200 ``times`` in a row, each on a new connection (any worker)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for _ in range(times):
        _wait_http(url, 60.0, proc)
        with opener.open(url, timeout=5):
            pass


# ---------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class CellKey:
    via: str  # "direct", "ref" or "gw"
    workers: int  # 0 for direct
    what: str  # an upstream kind (direct, ref) or a path key (gw)

    @property
    def name(self) -> str:
        return f"{self.via}:{self.workers}:{self.what}"


@dataclass
class Cell:
    ok: int = 0
    errors: int = 0
    first_error: str = ""
    latencies_us: list[int] = field(default_factory=list)
    round_rps: list[float] = field(default_factory=list)
    mid_cpu_s: float = 0.0
    cores: dict[str, list[float]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        pct = LoadResult(latencies_s=[us / 1e6 for us in self.latencies_us]).percentile_ms
        return {
            "calls": self.ok,
            "errors": self.errors,
            **({"first_error": self.first_error} if self.first_error else {}),
            "throughput_rps": round(statistics.median(self.round_rps), 1) if self.round_rps else 0,
            "round_rps": self.round_rps,
            "p50_ms": round(pct(50), 3),
            "p99_ms": round(pct(99), 3),
            "mid_cpu_us_per_call": round(1e6 * self.mid_cpu_s / self.ok, 1) if self.ok else None,
            "cores": {k: round(statistics.median(v), 2) for k, v in self.cores.items()},
        }


def _cells(config: Config) -> list[CellKey]:
    kinds = list(dict.fromkeys(PATHS[p].upstream for p in config.paths))
    keys = [CellKey("direct", 0, kind) for kind in kinds]
    for n in config.workers:
        keys += [CellKey("ref", n, kind) for kind in kinds]
        keys += [CellKey("gw", n, path) for path in config.paths]
    return keys


def _target(setup: Setup, key: CellKey) -> tuple[Mids, str, list[str]]:
    """The processes a cell goes through, the client's revision, and its URLs."""
    if key.via == "gw":
        path = PATHS[key.what]
        mids = setup.gateways[key.workers]
        return mids, path.revision, mids.urls[path.upstream]
    mids = setup.direct if key.via == "direct" else setup.refs[key.workers]
    return mids, NATIVE[key.what], mids.urls[key.what]


def prepare(setup: Setup, keys: list[CellKey]) -> None:
    """Every cell's connections, opened (and warmed) in every loader."""
    per_loader = max(1, setup.config.callers // len(setup.loaders))
    for key in keys:
        _, revision, urls = _target(setup, key)
        for loader in setup.loaders:
            loader.send(
                {
                    "op": "prepare",
                    "key": key.name,
                    "revision": revision,
                    "urls": urls,
                    "connections": per_loader,
                    "warmup": setup.config.warmup,
                }
            )
        for loader in setup.loaders:
            try:
                loader.answer()
            except RuntimeError as exc:
                raise RuntimeError(f"{key.name}: {exc}") from exc


def run_cell(setup: Setup, key: CellKey, cell: Cell) -> None:
    config = setup.config
    mids, _, _ = _target(setup, key)
    loaders = setup.loaders
    loader_pids = [loader.proc.pid for loader in loaders]
    up_pids = [proc.pid for proc in setup.upstreams]
    before = {
        "gateway": mids.cpu(),
        "load": sum(cpu_seconds(pid) for pid in loader_pids),
        "upstreams": sum(cpu_seconds(pid) for pid in up_pids),
        "machine": busy_cpu_s(),
    }
    began = time.perf_counter()
    for loader in loaders:
        loader.send(
            {
                "op": "run",
                "key": key.name,
                "calls": config.calls // len(loaders),
                "time_cap_s": config.time_cap_s,
            }
        )
    answers = [loader.answer() for loader in loaders]
    wall = time.perf_counter() - began
    used = {
        "gateway": mids.cpu() - before["gateway"],
        "load": sum(cpu_seconds(pid) for pid in loader_pids) - before["load"],
        "upstreams": sum(cpu_seconds(pid) for pid in up_pids) - before["upstreams"],
        "machine": busy_cpu_s() - before["machine"],
    }
    ok = sum(a["ok"] for a in answers)
    elapsed = max(a["elapsed_s"] for a in answers)
    cell.ok += ok
    cell.errors += sum(a["errors"] for a in answers)
    cell.first_error = cell.first_error or next(
        (a["first_error"] for a in answers if a["first_error"]), ""
    )
    for answer in answers:
        cell.latencies_us += answer["latencies_us"]
    cell.round_rps.append(round(ok / elapsed, 1) if elapsed else 0.0)
    cell.mid_cpu_s += used["gateway"]
    for side, seconds in used.items():
        cell.cores.setdefault(side, []).append(seconds / wall)


def measure(setup: Setup) -> dict[CellKey, Cell]:
    keys = _cells(setup.config)
    prepare(setup, keys)
    cells = {key: Cell() for key in keys}
    for round_ in range(setup.config.rounds):
        shift = round_ * 5 % len(keys)  # a different order each round
        for key in keys[shift:] + keys[:shift]:
            run_cell(setup, key, cells[key])
        for proc in setup.lab.procs:
            proc.check_alive()
    return cells


# ---------------------------------------------------------------------------- report


def rows(config: Config, cells: dict[CellKey, Cell]) -> list[dict[str, Any]]:
    out = []
    summaries = {key: cell.summary() for key, cell in cells.items()}
    for path_key in config.paths:
        path = PATHS[path_key]
        direct = summaries[CellKey("direct", 0, path.upstream)]
        one = summaries[CellKey("gw", config.workers[0], path_key)]["throughput_rps"]
        ref_one = summaries[CellKey("ref", config.workers[0], path.upstream)]["throughput_rps"]
        for n in config.workers:
            gw = summaries[CellKey("gw", n, path_key)]
            ref = summaries[CellKey("ref", n, path.upstream)]
            base = config.workers[0]
            row = {
                "path": path_key,
                "label": path.label,
                "workers": n,
                "gateway": gw,
                "reference": ref,
                "direct": direct,
                "throughput_x_ref": _ratio(gw["throughput_rps"], ref["throughput_rps"]),
                "scaling": _ratio(gw["throughput_rps"], one),
                "efficiency": _ratio(gw["throughput_rps"] * base, one * n),
                "ref_efficiency": _ratio(ref["throughput_rps"] * base, ref_one * n),
            }
            for q in ("p50", "p99"):
                row[f"{q}_added_ms"] = round(gw[f"{q}_ms"] - direct[f"{q}_ms"], 3)
                row[f"{q}_added_ref_ms"] = round(ref[f"{q}_ms"] - direct[f"{q}_ms"], 3)
            out.append(row)
    return out


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def verdict(config: Config, cells: dict[CellKey, Cell], cpus: int) -> dict[str, Any]:
    """Whether this machine can show the gateway scaling: the cores one worker's
    throughput takes on every side, and how many workers that leaves room for."""
    first = config.workers[0]
    sides: dict[str, float] = {"gateway": 0.0, "load": 0.0, "upstreams": 0.0}
    for path in config.paths:
        cores = cells[CellKey("gw", first, path)].summary()["cores"]
        for side in sides:
            sides[side] = max(sides[side], cores.get(side, 0.0))
    per_worker = sum(sides.values()) / max(sides["gateway"], 1e-9) * first
    room = int(cpus / per_worker) if per_worker else 0
    saturated = [
        key.name
        for key, cell in cells.items()
        if key.via == "gw" and cell.summary()["cores"].get("machine", 0) >= 0.9 * cpus
    ]
    return {
        "cores_at_first_count": {k: round(v, 2) for k, v in sides.items()},
        "cores_per_worker_all_sides": round(per_worker, 2),
        "workers_this_machine_can_show": room,
        "saturated_cells": saturated,
        "too_small": room < 4 or cpus < 4,
    }


def run(config: Config) -> dict[str, Any]:
    lab = Lab(gateway_log_level="warning")
    load_before = _loadavg()
    busy = busy_cpu_s()
    began = time.perf_counter()
    try:
        setup = start(config, lab)
        cells = measure(setup)
        for loader in setup.loaders:
            loader.send({"op": "quit"})
    finally:
        lab.close()
    wall = time.perf_counter() - began
    cpus = os.cpu_count() or 1
    return {
        "machine": machine(),
        "config": {
            **{k: list(v) if isinstance(v, tuple) else v for k, v in config.__dict__.items()},
            "callers": config.callers,
        },
        "load_average_before": load_before,
        "load_average_after": _loadavg(),
        "machine_busy_cores": round((busy_cpu_s() - busy) / wall, 2),
        "wall_s": round(wall, 1),
        "rows": rows(config, cells),
        "direct": {key.what: cell.summary() for key, cell in cells.items() if key.via == "direct"},
        "verdict": verdict(config, cells, cpus),
    }


def render(report: dict[str, Any]) -> str:
    m, c, v = report["machine"], report["config"], report["verdict"]
    lines = [
        f"gateway --workers N vs the reference proxy x N: {m['cpus']} CPUs ({m['cpu_model']}), "
        f"Python {m['python']}, aiohttp {m['aiohttp']}, --loop {c['loop']}",
        f"workers {c['workers']}; {c['loaders']} load processes, {c['callers']} connections "
        f"(one caller each); {c['upstreams']} modern upstreams on one port, {c['upstreams']} "
        f"legacy ones (a route each); {c['rounds']} rounds of {c['calls']} calls per cell",
        f"load average before {report['load_average_before']}, after "
        f"{report['load_average_after']}; the whole machine busy {report['machine_busy_cores']} "
        f"cores on average; {report['wall_s']} s wall",
        "req/s: median of the rounds; xN: over the first worker count; eff: req/s(N) / "
        "(N x req/s(1)); xref: over the reference proxy with N processes; +p50/+p99: ms added "
        "to the direct call (ref: the proxy's); CPU: us per call in the gateway's processes; "
        "cores: gateway / load / upstreams / whole machine, during the cell",
        "",
        f"{'path':<40} {'N':>3} {'req/s':>7} {'xN':>5} {'eff':>5} {'ref/s':>7} {'ref eff':>7} "
        f"{'xref':>5} {'+p50':>6} {'ref':>6} {'+p99':>7} {'ref':>7} {'CPU':>6} "
        f"{'cores gw/ld/up/all':>20}",
    ]
    for row in report["rows"]:
        gw, ref = row["gateway"], row["reference"]
        cores = gw["cores"]
        split = "/".join(
            f"{cores.get(k, 0):.2f}" for k in ("gateway", "load", "upstreams", "machine")
        )
        lines.append(
            f"{row['label']:<40} {row['workers']:>3} {gw['throughput_rps']:>7.0f} "
            f"{_f(row['scaling'])} {_f(row['efficiency'])} {ref['throughput_rps']:>7.0f} "
            f"{_f(row['ref_efficiency'], 7)} {_f(row['throughput_x_ref'])} "
            f"{row['p50_added_ms']:>6.2f} {row['p50_added_ref_ms']:>6.2f} "
            f"{row['p99_added_ms']:>7.2f} {row['p99_added_ref_ms']:>7.2f} "
            f"{gw['mid_cpu_us_per_call'] or 0:>6.0f} {split:>20}"
            + (f"  ! {gw['errors']} errors: {gw['first_error'][:60]}" if gw["errors"] else "")
        )
    sides = v["cores_at_first_count"]
    lines += [
        "",
        f"at {c['workers'][0]} worker(s) the gateway used {sides['gateway']} cores, the load "
        f"{sides['load']}, the upstreams {sides['upstreams']}: each worker's share of "
        f"throughput takes about {v['cores_per_worker_all_sides']} cores in all, so this "
        f"machine ({m['cpus']} cores) can show about {v['workers_this_machine_can_show']} "
        "worker(s) at full speed",
    ]
    if v["too_small"]:
        lines.append(
            "THIS MACHINE IS TOO SMALL TO SHOW SCALING: the gateway, the load and the upstreams "
            "share its cores, so the ratios above measure the machine, not the gateway "
            "(run it where at least 4 workers fit)"
        )
    if v["saturated_cells"]:
        lines.append(f"cells with the machine >= 90% busy: {', '.join(v['saturated_cells'])}")
    return "\n".join(lines)


def _f(value: float | None, width: int = 5) -> str:
    return ("-" if value is None else f"{value:.2f}").rjust(width)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale", description="Throughput as --workers grows."
    )
    parser.add_argument("--quick", action="store_true", help="one round, 1,000 calls a cell")
    parser.add_argument("--tiny", action="store_true", help="the smoke test's run (meaningless)")
    parser.add_argument("--workers", help="worker counts, e.g. 1,2,4 (default: from the cores)")
    parser.add_argument("--loaders", type=int, help="load processes (default: cores / 2, >= 2)")
    parser.add_argument("--upstreams", type=int, help="upstream processes of each kind")
    parser.add_argument("--rounds", type=int, help="rounds (default 3)")
    parser.add_argument("--calls", type=int, help="calls per cell (default 10,000)")
    parser.add_argument("--paths", help=f"comma-separated, of {', '.join(PATHS)}")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {"loop": args.loop}
    if args.quick:
        overrides |= {"rounds": 1, "calls": 1000}
    if args.tiny:
        overrides |= {"rounds": 1, "calls": 40, "warmup": 1, "workers": (1, 2)}
        overrides |= {"loaders": 1, "upstreams": 1}
    for name in ("loaders", "upstreams", "rounds", "calls"):
        if getattr(args, name):
            overrides[name] = getattr(args, name)
    if args.workers:
        overrides["workers"] = tuple(int(n) for n in args.workers.split(","))
    if args.paths:
        overrides["paths"] = tuple(p.strip() for p in args.paths.split(","))
        unknown = [p for p in overrides["paths"] if p not in PATHS]
        if unknown:
            parser.error(f"unknown paths {unknown}; known: {', '.join(PATHS)}")
    config = Config.for_machine(os.cpu_count() or 1, **overrides)
    signal.signal(signal.SIGTERM, _on_sigterm)
    raise_fd_limit()
    if not args.json:
        print("starting upstreams, reference proxies, gateways, load ...", file=sys.stderr)
    report = run(config)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
