"""Speed as a client sees it: one client process, 16 workers, each on its own connection.

    python -m bench.clientside                 # 6 rotated rounds of 3,000 calls per lane, uvloop
    python -m bench.clientside --loop asyncio  # the gateway and the reference proxy on asyncio
    python -m bench.clientside --ref-loop asyncio   # the proxy on aiohttp's default loop
    python -m bench.clientside --rounds 2 --calls 500 --json

This is the issue 38 measure, kept so anyone can repeat it: one aiohttp client
process (this one), 16 workers, each with its own ``ClientSession`` holding one
keep-alive connection, calling ``tools/call echo`` as fast as answers come
(2025-11-25 workers ``initialize`` once and reuse their session; 2026-07-28
workers send stateless calls). Lanes run in a new rotation every round. Every
process here shares the machine's cores, so a lane's calls per second is set
by what *every* process spends per call, not only by the proxy in the middle.

Besides calls per second, each lane reports what each process spent per call
(user and system CPU, from ``/proc/PID/stat``: the client, the proxy or
gateway, the upstream), the middle's context switches per
call (``/proc/PID/status``), and the answer the client got
(content type, bytes). ``bench.instructions`` counts only the middle's
user-space instructions; the difference between the two measures is in these
columns (docs/performance.md, "The two measures").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench.procs import Lab, Mid, Proc
from bench.wire import LEGACY, MODERN, BadReply, LegacyClient, ModernClient, check_echo, decode

WORKERS = 16
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Lane:
    key: str
    label: str
    client: str  # the client's revision
    mid: str  # which process answers: "ref-L", "gw-L", "ref-M", "gw-M"
    reference: str  # the lane whose calls per second this one is compared with


LANES = (
    Lane("ref-L", "2025-11-25 -> ref proxy -> 2025-11-25 upstream", LEGACY, "ref-L", "ref-L"),
    Lane("same-L", "2025-11-25 -> gateway -> 2025-11-25 upstream", LEGACY, "gw-L", "ref-L"),
    Lane("cross-L", "2026-07-28 -> gateway -> 2025-11-25 upstream", MODERN, "gw-L", "ref-L"),
    Lane("ref-M", "2026-07-28 -> ref proxy -> 2026-07-28 upstream", MODERN, "ref-M", "ref-M"),
    Lane("same-M", "2026-07-28 -> gateway -> 2026-07-28 upstream", MODERN, "gw-M", "ref-M"),
    Lane("cross-M", "2025-11-25 -> gateway -> 2026-07-28 upstream", LEGACY, "gw-M", "ref-M"),
)


@dataclass(frozen=True)
class Usage:
    """A process's counters at one moment."""

    user: float
    system: float
    switches: int = 0

    @classmethod
    def of(cls, pid: int | None) -> Usage:
        if pid is None:  # this process
            times = os.times()
            return cls(times.user, times.system)
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        switches = sum(int(line.split()[1]) for line in status if "ctxt_switches" in line)
        return cls(int(fields[11]) / TICKS, int(fields[12]) / TICKS, switches)

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.user - other.user, self.system - other.system, self.switches - other.switches
        )


@dataclass
class Cell:
    """One lane, summed over the rounds."""

    calls: int = 0
    seconds: float = 0.0
    round_rps: list[float] = field(default_factory=list)
    usage: dict[str, list[Usage]] = field(default_factory=dict)
    answer_bytes: int = 0
    content_types: set[str] = field(default_factory=set)

    def per_call(self, who: str, pick: Callable[[Usage], float], scale: float = 1e6) -> float:
        return sum(pick(u) for u in self.usage.get(who, [])) * scale / max(self.calls, 1)


class Worker:
    """One MCP client on its own session and connection, counting what it receives."""

    def __init__(self, revision: str, url: str) -> None:
        connector = aiohttp.TCPConnector(limit=1, force_close=False)
        self.http = aiohttp.ClientSession(connector=connector)
        self.client = (LegacyClient if revision == LEGACY else ModernClient)(self.http, url)
        self.bytes = 0
        self.content_types: set[str] = set()

    async def start(self) -> None:
        if isinstance(self.client, LegacyClient):
            await self.client.initialize()

    def _request(self, i: int, text: str) -> tuple[dict[str, Any], dict[str, str]]:
        params: dict[str, Any] = {"name": "echo", "arguments": {"text": text}}
        if isinstance(self.client, ModernClient):
            params["_meta"] = self.client.meta
            return _call(i, params), self.client.headers("tools/call", "echo")
        assert isinstance(self.client, LegacyClient)
        return _call(i, params), self.client.session_headers

    async def echo(self, i: int) -> None:
        text = f"bench-{i}"
        message, headers = self._request(i, text)
        body = orjson.dumps(message)
        async with self.http.post(self.client.url, data=body, headers=headers) as r:
            body = await r.read()
            if r.status != 200:
                raise BadReply(f"HTTP {r.status}: {body[:300]!r}")
            self.bytes += len(body)
            self.content_types.add(r.content_type)
            check_echo(decode(body, r.content_type, i), text)

    async def close(self) -> None:
        await self.http.close()


def _call(i: int, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}


async def _drive(workers: list[Worker], calls: int) -> float:
    """``calls`` echo calls spread over the workers, each waiting for its answer."""
    counter = iter(range(calls))

    async def loop(worker: Worker) -> None:
        for i in counter:
            await worker.echo(i)

    started = time.perf_counter()
    await asyncio.gather(*(loop(w) for w in workers))
    return time.perf_counter() - started


@dataclass
class Bench:
    lab: Lab
    mids: dict[str, Mid]
    upstreams: dict[str, Proc]
    workers: dict[str, list[Worker]] = field(default_factory=dict)
    cells: dict[str, Cell] = field(default_factory=dict)

    def pids(self, lane: Lane) -> dict[str, int | None]:
        upstream = self.upstreams[lane.mid[-1]]
        return {"client": None, "mid": self.mids[lane.mid].proc.pid, "upstream": upstream.pid}

    async def open(self, warmup: int) -> None:
        for lane in LANES:
            url = self.mids[lane.mid].url
            self.workers[lane.key] = [Worker(lane.client, url) for _ in range(WORKERS)]
            await asyncio.gather(*(w.start() for w in self.workers[lane.key]))
            await _drive(self.workers[lane.key], warmup)
            for worker in self.workers[lane.key]:
                worker.bytes = 0
            self.cells[lane.key] = Cell()

    async def cell(self, lane: Lane, calls: int) -> None:
        pids = self.pids(lane)
        before = {who: Usage.of(pid) for who, pid in pids.items()}
        seconds = await _drive(self.workers[lane.key], calls)
        after = {who: Usage.of(pid) for who, pid in pids.items()}
        cell = self.cells[lane.key]
        cell.calls += calls
        cell.seconds += seconds
        cell.round_rps.append(calls / seconds)
        for who in pids:
            cell.usage.setdefault(who, []).append(after[who] - before[who])

    async def close(self) -> None:
        for key, workers in self.workers.items():
            for worker in workers:
                self.cells[key].answer_bytes += worker.bytes
                self.cells[key].content_types |= worker.content_types
                await worker.close()


def start(lab: Lab, uvloop: bool, ref_uvloop: bool) -> Bench:
    up = {"L": lab.upstream("legacy"), "M": lab.upstream("modern")}
    proxy_extra = ["--uvloop"] if ref_uvloop else []
    mids = {
        "ref-L": lab.refproxy("ref-L", up["L"].url, extra=proxy_extra),
        "ref-M": lab.refproxy("ref-M", up["M"].url, extra=proxy_extra),
        "gw-L": lab.gateway("gw-L", up["L"].url, uvloop=uvloop),
        "gw-M": lab.gateway("gw-M", up["M"].url, uvloop=uvloop),
    }
    return Bench(lab, mids, {key: u.proc for key, u in up.items()})


async def run(
    rounds: int, calls: int, warmup: int, uvloop: bool, ref_uvloop: bool
) -> dict[str, Any]:
    lab = Lab()
    try:
        bench = start(lab, uvloop, ref_uvloop)
        await bench.open(warmup)
        for r in range(rounds):
            for lane in LANES[r % len(LANES) :] + LANES[: r % len(LANES)]:
                await bench.cell(lane, calls)
        await bench.close()
        return report(bench, rounds, calls, uvloop, ref_uvloop)
    finally:
        lab.close()


def report(bench: Bench, rounds: int, calls: int, uvloop: bool, ref_uvloop: bool) -> dict[str, Any]:
    lanes: dict[str, Any] = {}
    for lane in LANES:
        cell = bench.cells[lane.key]
        ref = bench.cells[lane.reference]
        rps = cell.calls / cell.seconds
        lanes[lane.key] = {
            "label": lane.label,
            "calls_per_s": round(rps, 1),
            "x_ref": round(rps / (ref.calls / ref.seconds), 3),
            "round_x_ref": [
                round(a / b, 3) for a, b in zip(cell.round_rps, ref.round_rps, strict=True)
            ],
            **_costs(cell),
        }
    return {
        "loop": "uvloop" if uvloop else "asyncio",
        "ref_loop": "uvloop" if ref_uvloop else "asyncio",
        "rounds": rounds,
        "calls_per_lane_and_round": calls,
        "workers": WORKERS,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "lanes": lanes,
    }


def _costs(cell: Cell) -> dict[str, Any]:
    """Per call: each process's user and system CPU (us), the middle's context switches."""
    costs: dict[str, Any] = {}
    for who in ("client", "mid", "upstream"):
        costs[f"{who}_user_us"] = round(cell.per_call(who, lambda u: u.user), 1)
        costs[f"{who}_sys_us"] = round(cell.per_call(who, lambda u: u.system), 1)
    costs["all_cpu_us"] = round(
        sum(costs[f"{w}_{k}_us"] for w in ("client", "mid", "upstream") for k in ("user", "sys")),
        1,
    )
    costs["mid_switches"] = round(cell.per_call("mid", lambda u: u.switches, 1), 2)
    costs["answer"] = ",".join(sorted(t.split("/")[-1] for t in cell.content_types))
    costs["answer_bytes"] = round(cell.answer_bytes / max(cell.calls, 1))
    return costs


COLUMNS = (
    ("calls_per_s", "calls/s"),
    ("x_ref", "x ref"),
    ("client_user_us", "cli usr"),
    ("client_sys_us", "cli sys"),
    ("mid_user_us", "mid usr"),
    ("mid_sys_us", "mid sys"),
    ("upstream_user_us", "up usr"),
    ("upstream_sys_us", "up sys"),
    ("all_cpu_us", "all us"),
    ("mid_switches", "mid csw"),
    ("answer_bytes", "bytes"),
    ("answer", "answer"),
)


def print_table(figures: dict[str, Any]) -> None:
    print(
        f"{figures['workers']} workers, each its own connection; {figures['rounds']} rotated "
        f"rounds of {figures['calls_per_lane_and_round']} calls per lane; loop "
        f"{figures['loop']} (reference proxy: {figures['ref_loop']}); {figures['cpus']} CPUs; "
        "load average after "
        f"{[round(x, 2) for x in figures['load_average']]}"
    )
    print("per call: CPU us of each process (user, system), the middle's context switches")
    print(f"{'lane':48} " + " ".join(f"{title:>9}" for _, title in COLUMNS))
    for lane in figures["lanes"].values():
        row = " ".join(f"{lane[key]!s:>9}" for key, _ in COLUMNS)
        print(f"{lane['label']:48} {row}")
    for key, lane in figures["lanes"].items():
        if lane["label"].split(" -> ")[1] == "gateway":
            spread = lane["round_x_ref"]
            print(
                f"  {key}: x ref per round {spread} "
                f"(median {statistics.median(spread):.3f}, min {min(spread)}, max {max(spread)})"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.clientside", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=3000, help="per lane and round")
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    # Default: the proxy on the gateway's loop. ``asyncio`` is aiohttp's own default,
    # as a byte proxy is usually run (issue 38 measured that way).
    parser.add_argument("--ref-loop", choices=("same", "uvloop", "asyncio"), default="same")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    ref_loop = args.loop if args.ref_loop == "same" else args.ref_loop
    figures = asyncio.run(
        run(args.rounds, args.calls, args.warmup, args.loop == "uvloop", ref_loop == "uvloop")
    )
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        print_table(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
