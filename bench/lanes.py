"""The four lanes against the byte proxy, as issue 50 measures them.

    python -m bench.lanes                  # 4 rotating rounds of 4 s a lane, 16 connections
    python -m bench.lanes --rounds 2 --seconds 2 --json
    python -m bench.lanes --full-path      # also both same-revision lanes with --no-pass-through
    python -m bench.lanes --pinned         # wrk, Node upstreams; gateway and proxy side by side

Two upstreams (the demo server, 2025-11-25, and bench.upstreams' 2026-07-28 echo
server), a byte-forwarding aiohttp proxy on uvloop (bench/refproxy.py) and a
gateway on uvloop in front of each.  The load is a stdlib process (bench/stdload.py:
threads, one keep-alive connection each), a new one for every cell, so the client
costs the same whatever it calls.  Every round runs every lane in a new rotation.

Each gateway lane is compared with the proxy in front of the same upstream, called
by a client of that upstream's revision (the proxy translates nothing): its calls
per second over the proxy's, the medians of the rounds.  Then at one connection,
each path's p50 and what it adds to the direct call (client to upstream): the
gateway's added p50 against the proxy's.

With ``--pinned`` (the steadier measure, ~5 min at 8 rounds) the load is wrk (bench/wrkload.py)
and the upstreams are Node (bench/fastup.js), all on one CPU, where they use a
fraction of it; the middles are on the other CPU, and each gateway lane is loaded
at the same time as its proxy, so the two middles share that CPU and are both
busy (``busy`` near 0.50 each says so).  Whatever slows the CPU in a window
(another tenant of the VM, a frequency step) slows both alike, and each window's
pair is one ratio: on this two-core VM a lane's rounds stay mostly within 0.05 of
their median (at most 0.09), where the stdlib load's rounds (the load, the upstream
and the middle contending for two cores) move by 0.2-0.35.  A lane's calls per
second are then its middle's share of a CPU, and their ratio what the gateway
serves per core against the proxy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from bench.clientside import LANES, Lane  # the same six lanes, the one list of them
from bench.procs import Lab, cpu_seconds
from bench.wire import LEGACY, MODERN

CONNECTIONS = 16
T = TypeVar("T")


# What the targets ask of each gateway lane (its ratio to the proxy's).
TARGETS = {"same-L": 0.97, "same-M": 0.97, "cross-L": 0.95, "cross-M": 0.92}
# With --full-path: the same-revision lanes again through gateways whose pass-through
# lane is off (every call down the full path), in the same rotation.
FULL_PATH = (
    Lane("full-L", "2025-11-25 -> gw, no pass-through -> 2025-11-25", LEGACY, "gwfull-L", "ref-L"),
    Lane("full-M", "2026-07-28 -> gw, no pass-through -> 2026-07-28", MODERN, "gwfull-M", "ref-M"),
)


# --pinned: the load and the upstreams on one CPU, every middle on another (the first
# two this process may use; set in measure()).
PINS = {"load": 0, "mid": 1}
# The load process: bench.stdload, or with --pinned bench.wrkload under taskset on the
# load's CPU, wrapper and wrk alike (its start-up must not land on the middles' CPU).
LOADER: list[str] = [sys.executable, "-m", "bench.stdload"]


def load(url: str, revision: str, connections: int, seconds: float) -> dict[str, Any]:
    """One cell: a load process against ``url``."""
    argv = [*LOADER, url, revision, str(connections), str(seconds)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{LOADER[-1]} {url} {revision}: {done.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def urls(
    lab: Lab, full_path: bool = False, pinned: bool = False, node: bool = True
) -> dict[str, str]:
    """Where each path answers: the upstreams, and a proxy and a gateway before each
    (``full_path``: and a gateway with its pass-through lane off; ``pinned``: the
    upstreams on the load's CPU, Node's unless not ``node``, the middles on the other)."""
    if pinned and node:
        up = {"L": lab.fast_upstream("legacy"), "M": lab.fast_upstream("modern")}
    else:
        up = {"L": lab.upstream("legacy"), "M": lab.upstream("modern")}
    for each in up.values():
        if pinned:  # every thread of it (-a), not only the main one
            argv = ["taskset", "-a", "-p", "-c", str(PINS["load"]), str(each.proc.pid)]
            subprocess.run(argv, check=True, capture_output=True)
    pin = ["taskset", "-c", str(PINS["mid"])] if pinned else []
    found = {f"up-{k}": u.url for k, u in up.items()}
    for k, u in up.items():
        mids = {
            f"ref-{k}": lab.refproxy(f"ref-{k}", u.url, wrapper=pin, extra=["--uvloop"]),
            f"gw-{k}": lab.gateway(f"gw-{k}", u.url, uvloop=True, wrapper=pin),
        }
        if full_path:
            off = ["--no-pass-through"]
            mids[f"gwfull-{k}"] = lab.gateway(
                f"gwfull-{k}", u.url, uvloop=True, wrapper=pin, extra=off
            )
        for key, mid in mids.items():
            found[key] = mid.url
            _PIDS[key] = mid.proc.pid
    return found


# The middle processes by key: their CPU is read around each cell.
_PIDS: dict[str, int] = {}


def throughput(
    where: dict[str, str], rounds: int, seconds: float, lanes: tuple[Lane, ...] = LANES
) -> dict[str, list[float]]:
    """Calls per second of each lane, each round; and (in ``CPU``) the middle's CPU
    per request over all the rounds."""
    rps: dict[str, list[float]] = {lane.key: [] for lane in lanes}
    used: dict[str, list[float]] = {lane.key: [0.0, 0.0, 0.0] for lane in lanes}
    for r in range(rounds):
        for lane in _rotated(lanes, r):
            before = cpu_seconds(_PIDS[lane.mid])
            cell = _cell(where, lane, seconds)
            _count(used[lane.key], cpu_seconds(_PIDS[lane.mid]) - before, cell)
            rps[lane.key].append(cell["calls"] / cell["seconds"])
    _figures(used)
    return rps


def side_by_side(
    where: dict[str, str], rounds: int, seconds: float, lanes: tuple[Lane, ...] = LANES
) -> dict[str, list[float]]:
    """--pinned: each gateway lane and its proxy loaded at once, both middles on the
    one CPU: whatever slows that CPU in a window (another tenant of the VM, a
    frequency step) slows both, and their figures are compared window by window.
    A lane's own proxy figures go under ``KEY@ref`` (and also its proxy's row)."""
    gateway_lanes = [lane for lane in lanes if lane.key != lane.reference]
    rps: dict[str, list[float]] = {lane.key: [] for lane in lanes}
    rps |= {f"{lane.key}@ref": [] for lane in gateway_lanes}
    used: dict[str, list[float]] = {key: [0.0, 0.0, 0.0] for key in rps}
    by_key = {lane.key: lane for lane in lanes}
    for r in range(rounds):
        for lane in _rotated(gateway_lanes, r):
            pair = ((lane.key, lane), (f"{lane.key}@ref", by_key[lane.reference]))
            before = {key: cpu_seconds(_PIDS[each.mid]) for key, each in pair}
            with ThreadPoolExecutor(2) as pool:
                cells = list(pool.map(lambda kv: _cell(where, kv[1], seconds), pair))
            for (key, each), cell in zip(pair, cells, strict=True):
                cpu = cpu_seconds(_PIDS[each.mid]) - before[key]
                # The proxy's figures count for this lane's pairs and for its own row.
                for into in {key, each.key}:
                    _count(used[into], cpu, cell)
                    rps[into].append(cell["calls"] / cell["seconds"])
    _figures(used)
    return rps


def _rotated(items: Sequence[T], r: int) -> list[T]:
    """Round ``r``'s order: each round starts one further on (no lane always first)."""
    k = r % len(items)
    return [*items[k:], *items[:k]]


def _cell(where: dict[str, str], lane: Lane, seconds: float) -> dict[str, Any]:
    return load(where[lane.mid], lane.client, CONNECTIONS, seconds)


def _count(into: list[float], cpu: float, cell: dict[str, Any]) -> None:
    into[0] += cpu
    into[1] += cell["sent"]
    into[2] += cell["seconds"]


def _figures(used: dict[str, list[float]]) -> None:
    CPU.update({key: cpu / sent * 1e6 for key, (cpu, sent, _) in used.items() if sent})
    BUSY.update({key: cpu / wall for key, (cpu, _, wall) in used.items() if wall})


CPU: dict[str, float] = {}  # us of the middle's CPU per request, by lane
# The middle's CPU seconds over the cells' seconds: near 1.00, it is what limits.
BUSY: dict[str, float] = {}


def latency(
    where: dict[str, str], seconds: float, lanes: tuple[Lane, ...] = LANES, rounds: int = 1
) -> dict[str, float]:
    """p50 at one connection: every lane, and the direct call to each upstream; with
    ``rounds``, the median of that many rotating cells each (--pinned: a tenth of a
    millisecond is what the target allows, and one cell's p50 moves by about that)."""
    paths = [(lane.key, where[lane.mid], lane.client) for lane in lanes]
    paths += [("direct-L", where["up-L"], LEGACY), ("direct-M", where["up-M"], MODERN)]
    p50s: dict[str, list[float]] = {key: [] for key, _, _ in paths}
    for r in range(rounds):
        for key, url, rev in _rotated(paths, r):
            p50s[key].append(load(url, rev, 1, seconds)["p50_ms"])
    return {key: statistics.median(values) for key, values in p50s.items()}


def report(
    rps: dict[str, list[float]], p50: dict[str, float], lanes_run: tuple[Lane, ...] = LANES
) -> dict[str, Any]:
    lanes = {}
    for lane in lanes_run:
        # Side by side (--pinned), a lane's own proxy figures; else its proxy's row.
        ref_key = f"{lane.key}@ref" if f"{lane.key}@ref" in rps else lane.reference
        median = statistics.median(rps[lane.key])
        reference = statistics.median(rps[ref_key])
        direct = p50[f"direct-{lane.mid[-1]}"]
        # Each round's cell over its reference's in the same round: a drift of the
        # machine over the run (another process, a thermal step) cancels in a pair.
        paired = [a / b for a, b in zip(rps[lane.key], rps[ref_key], strict=True)]
        cpu, ref_cpu = CPU.get(lane.key, 0.0), CPU.get(ref_key, 0.0)
        lanes[lane.key] = {
            "label": lane.label,
            "rps": round(median),
            "rounds_rps": [round(x) for x in rps[lane.key]],
            "ratio": round(median / reference, 3),
            "paired": [
                round(statistics.median(paired), 3),
                round(min(paired), 3),
                round(max(paired), 3),
            ],
            # The middle's CPU per request over the proxy's: what a core-bound
            # deployment pays, and the steadiest figure on a shared machine.
            "cpu_ratio": round(cpu / ref_cpu, 3) if ref_cpu else None,
            "p50_ms": round(p50[lane.key], 3),
            "added_p50_ms": round(p50[lane.key] - direct, 3),
            "mid_cpu_us": round(CPU.get(lane.key, 0.0), 1),
            "mid_busy": round(BUSY.get(lane.key, 0.0), 2),
            "target": TARGETS.get(lane.key),
        }
    return {"connections": CONNECTIONS, "lanes": lanes}


def render(figures: dict[str, Any]) -> str:
    lines = [
        f"{'lane':<48} {'calls/s':>8} {'x proxy':>8} {'paired (low-high)':>19} {'target':>7}"
        f" {'p50 ms':>7} {'+p50 ms':>8} {'mid us':>7} {'x cpu':>6} {'busy':>5}",
    ]
    for row in figures["lanes"].values():
        target = f"{row['target']:.2f}" if row["target"] else ""
        mid, low, high = row["paired"]
        paired = f"{mid:.3f} ({low:.2f}-{high:.2f})"
        lines.append(
            f"{row['label']:<48} {row['rps']:>8} {row['ratio']:>8.3f} {paired:>19} {target:>7} "
            f"{row['p50_ms']:>7.3f} {row['added_p50_ms']:>+8.3f} {row['mid_cpu_us']:>7.1f}"
            f" {row['cpu_ratio'] or 0:>6.3f} {row['mid_busy']:>5.2f}"
        )
    lines.append(
        f"({figures['connections']} connections a cell for calls/s, medians of the rounds;"
        " paired: each round's cell over the proxy's in that round, median and range;"
        " p50 at one connection, +p50 over the direct call; mid us: the proxy's or gateway's"
        " CPU per request, user + system, every round's; x cpu: that over the proxy's;"
        " busy: its CPU seconds over the cells' seconds)"
    )
    return "\n".join(lines)


def measure(
    rounds: int,
    seconds: float,
    full_path: bool = False,
    pinned: bool = False,
    node: bool = True,
) -> dict[str, Any]:
    lab = Lab()
    lanes = LANES + FULL_PATH if full_path else LANES
    if pinned:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise SystemExit("bench.lanes --pinned needs two CPUs (one for the middles)")
        PINS.update(load=cpus[0], mid=cpus[1])
    pin = ["taskset", "-c", str(PINS["load"])] if pinned else []
    LOADER[:] = [*pin, sys.executable, "-m", "bench.wrkload" if pinned else "bench.stdload"]
    try:
        where = urls(lab, full_path, pinned, node)
        run = side_by_side if pinned else throughput
        rps = run(where, rounds, seconds, lanes)
        p50 = latency(where, seconds / 2, lanes, rounds if pinned else 1)
        return report(rps, p50, lanes)
    finally:
        lab.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lanes", description=__doc__)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=4.0, help="a cell's window")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--full-path", action="store_true", help="also the same-revision lanes, pass-through off"
    )
    parser.add_argument(
        "--pinned",
        action="store_true",
        help="wrk and Node upstreams on one CPU; each gateway and its proxy at once on the other",
    )
    parser.add_argument(
        "--python-upstreams",
        action="store_true",
        help="with --pinned: the demo server and bench.upstreams' echo server, not Node's",
    )
    args = parser.parse_args(argv)
    node = not args.python_upstreams
    figures = measure(args.rounds, args.seconds, args.full_path, args.pinned, node)
    print(json.dumps(figures, indent=2) if args.json else render(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
