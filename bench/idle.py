"""`python -m bench.idle`: what each long-lived thing costs a gateway while it sits idle.

    .venv/bin/python -m bench.idle                    # 1,000 of each kind, 50 stdio children
    .venv/bin/python -m bench.idle --count 10000      # 10,000 of each (stdio: --stdio-count)
    .venv/bin/python -m bench.idle --kinds sessions,get_streams --json
    .venv/bin/python -m bench.idle --profile          # also: where the memory went (tracemalloc)

For each kind (bench/idle_kinds.py: handshake sessions, mirrored sessions,
GET streams, HTTP+SSE streams, listens, parked calls, stateless pools, stdio
children) a fresh `gateway serve` is started in front of the bench's
upstreams; a few things are opened and ended to warm it up; then, from a
baseline, ``count`` things are opened (timed), held idle while the gateway's
CPU is read over ``--idle-seconds``, and ended (timed), and the gateway's RSS
and open descriptors are read at each step.  Per thing: KiB of RSS,
descriptors, and the idle CPU of all of them as a share of one core; after
the end, RSS and descriptors against the baseline.

Stateless pools end only by idle expiry: `POOL_IDLE` is set (bench launcher
``--patch``) so they outlive the measurement and then expire; the figure is how
long after the last call the gauge was back, not a time to end them.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import resource
import signal
import sys
import time
import tracemalloc
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from bench.idle_kinds import BY_KEY, KINDS, Kind, Target, each
from bench.procs import HOST, Lab, Mid, Proc, Upstream, open_fds
from bench.run import _loadavg, busy_cpu_s, machine


@dataclass(frozen=True)
class Config:
    count: int = 1000
    stdio_count: int = 50
    idle_s: float = 20.0
    kinds: tuple[str, ...] = tuple(kind.key for kind in KINDS)
    concurrency: int = 32
    warmup: int = 20
    loop: str = "asyncio"
    profile: bool = False
    # Waited after calls to the handshake-era route before RSS and descriptors are read:
    # its idle upstream keep-alive connections close by then (aiohttp's, used for DELETE,
    # after 15 s checked every 15 s; the lean client's after 15 s).
    quiet_s: float = 32.0
    pool_idle_s: float | None = None  # POOL_IDLE for the run (None: from the count)

    @classmethod
    def tiny(cls) -> Config:
        """The smallest run (the smoke test's): figures meaningless, every path taken."""
        return cls(count=3, stdio_count=1, idle_s=0.2, warmup=1, quiet_s=0, pool_idle_s=5)

    def count_of(self, kind: Kind) -> int:
        return self.stdio_count if kind.stdio else self.count


def raise_fd_limit() -> int:
    """The soft RLIMIT_NOFILE raised to the hard one (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def _metrics(base: str) -> dict[str, float]:
    """The gateway's gauges, summed over their labels."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(base + "/metrics", timeout=10) as response:
        text = response.read().decode()
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        try:
            sums[name] = sums.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        except ValueError:
            continue
    return sums


@dataclass
class Reading:
    rss_kib: int
    fds: int
    cpu_s: float
    children: int
    children_rss_kib: int
    gauge: float

    @classmethod
    def of(cls, proc: Proc, base: str, gauge: str) -> Reading:
        kids = _children(proc.pid)
        return cls(
            rss_kib=proc.rss_kib(),
            fds=open_fds(proc.pid),
            cpu_s=proc.cpu_seconds(),
            children=len(kids),
            children_rss_kib=sum(_rss_or_zero(pid) for pid in kids),
            gauge=_metrics(base).get(gauge, 0.0) if gauge else 0.0,
        )


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _rss_or_zero(pid: int) -> int:
    from bench.procs import rss_kib

    try:
        return rss_kib(pid)
    except (OSError, RuntimeError):
        return 0


def _gateway(lab: Lab, config: Config, upstreams: dict[str, Upstream], kind: Kind) -> Mid:
    big = str(4 * max(config.count, config.stdio_count) + 1000)
    env = {
        f"GATEWAY_{name}": big
        for name in (
            "MAX_SESSIONS",
            "MAX_SESSIONS_PER_PRINCIPAL",
            "MAX_STREAMS",
            "MAX_STREAMS_PER_PRINCIPAL",
            "MAX_PARKED",
            "MAX_PARKED_PER_PRINCIPAL",
            "MAX_INFLIGHT",
            "MAX_INFLIGHT_PER_PRINCIPAL",
        )
    }
    stdio = f"{sys.executable} -m bench.stdio_echo"
    extra = [
        "--route", f"/m={upstreams['modern'].url}",
        "--route", f"/l={upstreams['legacy'].url},max_connections={big}",
        "--route", f"/s=stdio:{stdio}",
    ]  # fmt: skip
    launch = [
        "--gc-signal",
        "--patch", f"gateway.upstream.sessions:MAX_POOLS={big}",
        "--patch", f"gateway.upstream.sessions:POOL_IDLE={pool_idle(config)}",
    ]  # fmt: skip
    if config.profile:
        launch += ["--tracemalloc", str(lab.workdir / f"{kind.key}.snapshot")]
        launch += ["--gc-report", str(lab.workdir / f"{kind.key}.garbage")]
    # The bench's own route at /mcp is the modern upstream too (Lab.gateway's first route).
    return lab.gateway(
        f"gateway-{kind.key}",
        upstreams["modern"].url,
        uvloop=config.loop == "uvloop",
        launch=launch,
        extra=extra,
        env=env,
        timeout=180.0 if config.profile else 60.0,  # tracemalloc slows the start a lot
    )


def pool_idle(config: Config) -> float:
    """Long enough for ``count`` pools to be opened (about 100 a second on two shared
    cores) and held through the idle window, short enough to watch them expire."""
    if config.pool_idle_s is not None:
        return config.pool_idle_s
    return round(30 + config.count / 50 + 2 * config.idle_s, 1)


async def _settle(proc: Proc, base: str, kind: Kind, until: Reading, within: float) -> float:
    """Seconds until the kind's gauge and the stdio children are back at ``until``'s
    (or ``within`` passed): the gateway may end what a client left a moment later."""
    began = time.monotonic()
    while True:
        now = Reading.of(proc, base, kind.gauge)
        if now.gauge <= until.gauge and now.children <= until.children:
            return time.monotonic() - began
        if time.monotonic() - began > within:
            return float("nan")
        await asyncio.sleep(0.25)


@dataclass
class Phases:
    start: Reading
    opened: Reading
    still: Reading
    ended: Reading
    collected_rss_kib: int
    idle_before_s: float
    idle_s: float
    open_s: float
    end_s: float
    gauge_back_s: float


async def _quiet(kind: Kind, config: Config) -> None:
    """Wait out the upstream keep-alive after calls to a route with an upstream of HTTP:
    the descriptors read next are the held things' own, not connections left over."""
    if kind.route == "/l":
        await asyncio.sleep(config.quiet_s)


async def measure(
    config: Config, lab: Lab, upstreams: dict[str, Upstream], kind: Kind
) -> dict[str, Any]:
    count = config.count_of(kind)
    gw = _gateway(lab, config, upstreams, kind)
    base = gw.url.rsplit("/", 1)[0]
    try:
        phases = await _phases(config, gw, base, kind, count)
    finally:
        gw.proc.stop()
    return _row(kind, count, phases, config, lab)


async def _phases(config: Config, gw: Mid, base: str, kind: Kind, count: int) -> Phases:
    proc = gw.proc
    target = Target(HOST, int(base.rsplit(":", 1)[1]))
    try:
        warm = await each(config.warmup, lambda i: kind.open(target, 10_000_000 + i), 8)
        await each(len(warm), lambda i: kind.end(target, warm[i]), 8)
        target.drop_connections()
        await _quiet(kind, config)
        await asyncio.sleep(1.0)
        start = Reading.of(proc, base, kind.gauge)
        idle_before = await _idle_cpu(proc, config.idle_s / 2)
        _snapshot(proc, config)
        began = time.perf_counter()
        held = await each(count, lambda i: kind.open(target, i), config.concurrency)
        open_s = time.perf_counter() - began
        target.drop_connections()
        await asyncio.sleep(1.0)  # the gateway sees those connections close
        await _quiet(kind, config)
        opened = Reading.of(proc, base, kind.gauge)
        # Settled first: the window must not count the tail of opening, or of the reading.
        await asyncio.sleep(min(2.0, config.idle_s))
        idle = await _idle_cpu(proc, config.idle_s)
        still = Reading.of(proc, base, kind.gauge)
        _snapshot(proc, config)
        began = time.perf_counter()
        await each(count, lambda i: kind.end(target, held[i]), config.concurrency)
        end_s = time.perf_counter() - began
        target.drop_connections()
        within = 60.0 if kind.key != "pools" else pool_idle(config) * 1.25 + 30
        gauge_back_s = await _settle(proc, base, kind, start, within)
        await _quiet(kind, config)
        await asyncio.sleep(1.0)
        ended = Reading.of(proc, base, kind.gauge)
        os.kill(proc.pid, signal.SIGUSR2)  # a full collection (bench.gwlaunch --gc-signal)
        await asyncio.sleep(1.0)
        collected = proc.rss_kib()
        _snapshot(proc, config)
    finally:
        target.drop_connections()
    return Phases(
        start, opened, still, ended, collected, idle_before, idle, open_s, end_s, gauge_back_s
    )


def _snapshot(proc: Proc, config: Config) -> None:
    if config.profile:
        os.kill(proc.pid, signal.SIGUSR1)


async def _idle_cpu(proc: Proc, seconds: float) -> float:
    """The gateway's CPU seconds over ``seconds`` of wall time, nothing sent to it."""
    before = proc.cpu_seconds()
    await asyncio.sleep(seconds)
    return proc.cpu_seconds() - before


def _row(kind: Kind, count: int, p: Phases, config: Config, lab: Lab) -> dict[str, Any]:
    row: dict[str, Any] = {
        "kind": kind.key,
        "label": kind.label,
        "count": count,
        "rss_start_kib": p.start.rss_kib,
        "rss_open_kib": p.opened.rss_kib,
        "rss_end_kib": p.ended.rss_kib,
        "rss_collected_kib": p.collected_rss_kib,
        "kib_per_thing": round((p.opened.rss_kib - p.start.rss_kib) / count, 2),
        "fds_start": p.start.fds,
        "fds_open": p.opened.fds,
        "fds_end": p.ended.fds,
        "fds_per_thing": round((p.opened.fds - p.start.fds) / count, 3),
        "gauge": kind.gauge or None,
        "gauge_start": p.start.gauge,
        "gauge_open": p.opened.gauge,
        "gauge_after_idle": p.still.gauge,
        "gauge_end": p.ended.gauge,
        "gauge_back_s": None if p.gauge_back_s != p.gauge_back_s else round(p.gauge_back_s, 2),
        "idle_cpu_pct_of_core_before": round(100 * p.idle_before_s / (config.idle_s / 2), 3),
        "idle_cpu_pct_of_core": round(100 * p.idle_s / config.idle_s, 3),
        "open_s": round(p.open_s, 2),
        "end_s": round(p.end_s, 2) if kind.key != "pools" else None,
        "rss_delta_after_end_kib": p.ended.rss_kib - p.start.rss_kib,
        "rss_delta_after_gc_kib": p.collected_rss_kib - p.start.rss_kib,
        "fds_delta_after_end": p.ended.fds - p.start.fds,
    }
    if kind.stdio:
        opened, start = p.opened, p.start
        row |= {
            "children_open": opened.children,
            "children_end": p.ended.children,
            "child_rss_kib": round((opened.children_rss_kib - start.children_rss_kib) / count, 1),
        }
    if config.profile:
        snapshots = lab.workdir / f"{kind.key}.snapshot"
        row["top_allocations"] = _top_allocations(snapshots, 1, 2)
        row["left_after_end"] = _top_allocations(snapshots, 1, 3, limit=8)
        garbage = lab.workdir / f"{kind.key}.garbage"
        row["cyclic_garbage_at_end"] = (
            garbage.read_text().splitlines()[:15] if garbage.exists() else ["(none reported)"]
        )
    return row


def _top_allocations(prefix: Path, one: int, two: int, limit: int = 12) -> list[str]:
    """What grew between the baseline and the opened snapshot, by the gateway's line
    that asked for it (the innermost frame under gateway/; else the innermost one)."""
    first, second = Path(f"{prefix}.{one}"), Path(f"{prefix}.{two}")
    if not (first.exists() and second.exists()):
        return ["(no snapshots)"]
    old = tracemalloc.Snapshot.load(str(first))
    new = tracemalloc.Snapshot.load(str(second))
    total = sum(stat.size_diff for stat in new.compare_to(old, "filename"))
    grown: dict[str, list[int]] = {}
    for stat in new.compare_to(old, "traceback"):
        frames = list(stat.traceback)  # most recent call last (tracemalloc's default order)
        ours = [f for f in frames if "/gateway/" in f.filename]
        where = ours[-1] if ours else frames[-1]
        inner = frames[-1]
        key = f"{_short(where.filename)}:{where.lineno}"
        if inner is not where:
            key += f" ({_short(inner.filename)}:{inner.lineno})"
        entry = grown.setdefault(key, [0, 0])
        entry[0] += stat.size_diff
        entry[1] += stat.count_diff
    top = sorted(grown.items(), key=lambda item: -item[1][0])[:limit]
    lines = [f"{size / 1024:+9.1f} KiB {count:+7d} blocks  {key}" for key, (size, count) in top]
    return [f"traced {total / 1024:+.1f} KiB in all", *lines]


def _short(filename: str) -> str:
    for marker in ("/gateway/", "/site-packages/", "/python3.11/", "/lib/python3"):
        if marker in filename:
            return marker.strip("/") + "/" + filename.split(marker, 1)[1]
    return filename


async def run_all(config: Config) -> dict[str, Any]:
    lab = Lab()
    load_before = _loadavg()
    busy = busy_cpu_s()
    started = time.perf_counter()
    try:
        upstreams = {kind: lab.upstream(kind) for kind in ("legacy", "modern")}
        rows = [await measure(config, lab, upstreams, BY_KEY[key]) for key in config.kinds]
    finally:
        lab.close()
    wall = time.perf_counter() - started
    return {
        "machine": machine(),
        "config": {**config.__dict__, "kinds": list(config.kinds)},
        "fd_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        "load_average_before": load_before,
        "load_average_after": _loadavg(),
        "machine_busy_cores": round((busy_cpu_s() - busy) / wall, 2),
        "wall_s": round(wall, 1),
        "rows": rows,
    }


def render(report: dict[str, Any]) -> str:
    m, c = report["machine"], report["config"]
    lines = [
        f"gateway idle costs: {m['cpus']} CPUs ({m['cpu_model']}), Python {m['python']}, "
        f"aiohttp {m['aiohttp']}, gateway --loop {c['loop']}; {c['count']} of each kind "
        f"({c['stdio_count']} stdio children); idle CPU over {c['idle_s']} s",
        f"load average before {report['load_average_before']}, after "
        f"{report['load_average_after']}; the whole machine busy {report['machine_busy_cores']} "
        f"cores on average; {report['wall_s']} s wall; RLIMIT_NOFILE {report['fd_limit']}",
        "KiB/thing, fds/thing: the gateway's RSS and descriptors with them open, less its "
        "baseline, per thing; idle%: the gateway's CPU with them open, as a share of one core "
        "(base: before opening); open/end: seconds to open / to end them all; after end / "
        "after gc: KiB of RSS against the baseline once they ended / after a full collection; "
        "fds: start/open/end",
        *(
            [
                "PROFILE RUN: tracemalloc inflates RSS several times; read the allocations, "
                "not the KiB/thing"
            ]
            if c["profile"]
            else []
        ),
        "",
        f"{'kind':<12} {'count':>6} {'KiB/thing':>9} {'fds/thing':>9} {'idle%':>6} "
        f"{'base%':>6} {'open s':>7} {'end s':>7} {'RSS MiB start/open':>18} "
        f"{'after end':>9} {'after gc':>9} {'fds':>15}",
    ]
    for row in report["rows"]:
        end = "expiry" if row["end_s"] is None else f"{row['end_s']:.2f}"
        rss = f"{row['rss_start_kib'] / 1024:.1f}/{row['rss_open_kib'] / 1024:.1f}"
        fds = f"{row['fds_start']}/{row['fds_open']}/{row['fds_end']}"
        lines.append(
            f"{row['kind']:<12} {row['count']:>6} {row['kib_per_thing']:>9.2f} "
            f"{row['fds_per_thing']:>9.3f} {row['idle_cpu_pct_of_core']:>6.2f} "
            f"{row['idle_cpu_pct_of_core_before']:>6.2f} {row['open_s']:>7.2f} {end:>7} "
            f"{rss:>18} {row['rss_delta_after_end_kib']:>+9} {row['rss_delta_after_gc_kib']:>+9} "
            f"{fds:>15}"
        )
    lines.append("")
    for row in report["rows"]:
        lines += _details(row)
    return "\n".join(lines)


def _details(row: dict[str, Any]) -> list[str]:
    """A kind's label, its children and gauge, and its allocations (when profiled)."""
    lines: list[str] = []
    lines.append(f"{row['kind']:<12} {row['label']}")
    if "children_open" in row:
        lines.append(
            f"{'':<12} children open {row['children_open']}, after the end "
            f"{row['children_end']}; {row['child_rss_kib']} KiB RSS per child"
        )
    if row["gauge"]:
        back = row["gauge_back_s"]
        lines.append(
            f"{'':<12} {row['gauge']}: {row['gauge_start']:.0f} at the start, "
            f"{row['gauge_open']:.0f} open, {row['gauge_after_idle']:.0f} after the idle "
            f"window, {row['gauge_end']:.0f} at the end ("
            + (f"back {back:.1f} s after the end began)" if back is not None else "not back)")
        )
    for title, key in (
        ("grown while open", "top_allocations"),
        ("left after the end and a gc", "left_after_end"),
        (
            "what the gc found after the end (cyclic garbage: objects, type)",
            "cyclic_garbage_at_end",
        ),
    ):
        if key in row:
            lines.append(f"{'':<12} {title}:")
            lines += [f"{'':<14}{line}" for line in row[key]]
    return lines


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.idle", description="What idle long-lived things cost the gateway."
    )
    parser.add_argument("--count", type=int, default=1000, help="things of each kind (1000)")
    parser.add_argument("--stdio-count", type=int, default=50, help="stdio children (50)")
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="idle CPU window (20)")
    parser.add_argument(
        "--kinds", default=",".join(BY_KEY), help=f"comma-separated, of: {', '.join(BY_KEY)}"
    )
    parser.add_argument("--concurrency", type=int, default=32, help="opened at once (32)")
    parser.add_argument("--warmup", type=int, default=20, help="opened and ended first (20)")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--profile", action="store_true", help="tracemalloc the gateway")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--tiny", action="store_true", help="3 of each (the smoke test's run)")
    args = parser.parse_args(argv)
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    unknown = [k for k in kinds if k not in BY_KEY]
    if unknown:
        parser.error(f"unknown kinds {unknown}; known: {', '.join(BY_KEY)}")
    config = Config(
        count=args.count,
        stdio_count=args.stdio_count,
        idle_s=args.idle_seconds,
        kinds=kinds,
        concurrency=args.concurrency,
        warmup=args.warmup,
        loop=args.loop,
        profile=args.profile,
    )
    if args.tiny:
        config = dataclasses.replace(Config.tiny(), kinds=kinds, loop=args.loop)
    signal.signal(signal.SIGTERM, _on_sigterm)
    raise_fd_limit()
    report = asyncio.run(run_all(config))
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
