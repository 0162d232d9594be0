"""The four lanes against the byte proxy, as issue 50 measures them.

    python -m bench.lanes                  # 4 rotating rounds of 4 s a lane, 16 connections
    python -m bench.lanes --rounds 2 --seconds 2 --json
    python -m bench.lanes --full-path      # also both same-revision lanes with --no-pass-through

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
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from typing import Any

from bench.clientside import LANES, Lane  # the same six lanes, the one list of them
from bench.procs import Lab, cpu_seconds
from bench.wire import LEGACY, MODERN

CONNECTIONS = 16


# What the targets ask of each gateway lane (its ratio to the proxy's).
TARGETS = {"same-L": 0.97, "same-M": 0.97, "cross-L": 0.95, "cross-M": 0.92}
# With --full-path: the same-revision lanes again through gateways whose pass-through
# lane is off (every call down the full path), in the same rotation.
FULL_PATH = (
    Lane("full-L", "2025-11-25 -> gw, no pass-through -> 2025-11-25", LEGACY, "gwfull-L", "ref-L"),
    Lane("full-M", "2026-07-28 -> gw, no pass-through -> 2026-07-28", MODERN, "gwfull-M", "ref-M"),
)


def load(url: str, revision: str, connections: int, seconds: float) -> dict[str, Any]:
    """One cell: a stdlib load process against ``url``."""
    argv = [sys.executable, "-m", "bench.stdload", url, revision, str(connections), str(seconds)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bench.stdload {url} {revision}: {done.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def urls(lab: Lab, full_path: bool = False) -> dict[str, str]:
    """Where each path answers: the upstreams, and a proxy and a gateway before each
    (``full_path``: and a gateway with its pass-through lane off)."""
    up = {"L": lab.upstream("legacy"), "M": lab.upstream("modern")}
    found = {f"up-{k}": u.url for k, u in up.items()}
    for k, u in up.items():
        mids = {
            f"ref-{k}": lab.refproxy(f"ref-{k}", u.url, extra=["--uvloop"]),
            f"gw-{k}": lab.gateway(f"gw-{k}", u.url, uvloop=True),
        }
        if full_path:
            off = ["--no-pass-through"]
            mids[f"gwfull-{k}"] = lab.gateway(f"gwfull-{k}", u.url, uvloop=True, extra=off)
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
    used: dict[str, list[float]] = {lane.key: [0.0, 0.0] for lane in lanes}
    for r in range(rounds):
        for lane in lanes[r % len(lanes) :] + lanes[: r % len(lanes)]:
            before = cpu_seconds(_PIDS[lane.mid])
            cell = load(where[lane.mid], lane.client, CONNECTIONS, seconds)
            used[lane.key][0] += cpu_seconds(_PIDS[lane.mid]) - before
            used[lane.key][1] += cell["sent"]
            rps[lane.key].append(cell["calls"] / cell["seconds"])
    CPU.update({key: cpu / sent * 1e6 for key, (cpu, sent) in used.items() if sent})
    return rps


CPU: dict[str, float] = {}  # us of the middle's CPU per request, by lane


def latency(
    where: dict[str, str], seconds: float, lanes: tuple[Lane, ...] = LANES
) -> dict[str, float]:
    """p50 at one connection: every lane, and the direct call to each upstream."""
    paths = [(lane.key, where[lane.mid], lane.client) for lane in lanes]
    paths += [("direct-L", where["up-L"], LEGACY), ("direct-M", where["up-M"], MODERN)]
    return {key: load(url, rev, 1, seconds)["p50_ms"] for key, url, rev in paths}


def report(
    rps: dict[str, list[float]], p50: dict[str, float], lanes_run: tuple[Lane, ...] = LANES
) -> dict[str, Any]:
    lanes = {}
    for lane in lanes_run:
        median = statistics.median(rps[lane.key])
        reference = statistics.median(rps[lane.reference])
        direct = p50[f"direct-{lane.mid[-1]}"]
        # Each round's cell over its reference's in the same round: a drift of the
        # machine over the run (another process, a thermal step) cancels in a pair.
        paired = [a / b for a, b in zip(rps[lane.key], rps[lane.reference], strict=True)]
        cpu, ref_cpu = CPU.get(lane.key, 0.0), CPU.get(lane.reference, 0.0)
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
            "target": TARGETS.get(lane.key),
        }
    return {"connections": CONNECTIONS, "lanes": lanes}


def render(figures: dict[str, Any]) -> str:
    lines = [
        f"{'lane':<48} {'calls/s':>8} {'x proxy':>8} {'paired (low-high)':>19} {'target':>7}"
        f" {'p50 ms':>7} {'+p50 ms':>8} {'mid us':>7} {'x cpu':>6}",
    ]
    for row in figures["lanes"].values():
        target = f"{row['target']:.2f}" if row["target"] else ""
        mid, low, high = row["paired"]
        paired = f"{mid:.3f} ({low:.2f}-{high:.2f})"
        lines.append(
            f"{row['label']:<48} {row['rps']:>8} {row['ratio']:>8.3f} {paired:>19} {target:>7} "
            f"{row['p50_ms']:>7.3f} {row['added_p50_ms']:>+8.3f} {row['mid_cpu_us']:>7.1f}"
            f" {row['cpu_ratio'] or 0:>6.3f}"
        )
    lines.append(
        f"({figures['connections']} connections a cell for calls/s, medians of the rounds;"
        " paired: each round's cell over the proxy's in that round, median and range;"
        " p50 at one connection, +p50 over the direct call; mid us: the proxy's or gateway's"
        " CPU per request, user + system, every round's; x cpu: that over the proxy's)"
    )
    return "\n".join(lines)


def measure(rounds: int, seconds: float, full_path: bool = False) -> dict[str, Any]:
    lab = Lab()
    lanes = LANES + FULL_PATH if full_path else LANES
    try:
        where = urls(lab, full_path)
        rps = throughput(where, rounds, seconds, lanes)
        return report(rps, latency(where, seconds / 2, lanes), lanes)
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
    args = parser.parse_args(argv)
    figures = measure(args.rounds, args.seconds, args.full_path)
    print(json.dumps(figures, indent=2) if args.json else render(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
