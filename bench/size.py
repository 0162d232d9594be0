"""`python -m bench.size`: what the gateway's time and memory cost per unit of size.

    .venv/bin/python -m bench.size            # tools 100 -> 10,000; results 10 KiB -> 10 MiB;
                                              # batches 10 -> 1,000 (~5 min on 2 cores)
    .venv/bin/python -m bench.size --tiny     # the smallest sizes (the smoke test's)
    .venv/bin/python -m bench.size --json

One `gateway serve` in front of `bench.sized` (an upstream whose answers are as
large as asked, in both eras: /modern/N is a 2026-07-28 server, /legacy/N a
2025-11-25 one answering calls on SSE).  For each measure and size, every path
is called ``--reps`` times, the paths interleaved: direct to the upstream (the
baseline), and through the gateway in the same era and across eras.

- **tools**: ``tools/list`` of N tools (one page, ~300 bytes a tool);
- **results**: ``tools/call blob`` answering one text of B bytes (the modern
  upstream in JSON, the legacy one on an SSE stream);
- **batches**: a 2025-03-26 client's JSON-RPC batch of M ``tools/call echo``
  (2025-03-26 is the only revision with batches), through the gateway only.

Per call: wall time (median), the gateway's CPU (mean), and its peak RSS above where
it started (``/proc/PID/clear_refs`` resets the peak before each call; median).
Per unit: those divided by the size.  Linearity: the marginal cost per unit
between consecutive sizes, and the log-log slope of the last step (1 is linear;
above SUPERLINEAR it is flagged).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import signal
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import orjson

from bench.h1 import Conn, Reply
from bench.idle import raise_fd_limit
from bench.procs import HOST, Lab, Proc, _wait_port, free_port
from bench.run import _loadavg, busy_cpu_s, machine
from bench.wire import (
    INITIALIZED,
    JSON,
    LEGACY,
    BadReply,
    decode,
    initialize,
    modern_call,
    modern_headers,
    result_of,
)

KIB = 1024
MIB = 1024 * KIB
BATCH_REVISION = "2025-03-26"
# A last step whose log-log slope is above this is flagged as growing faster than linear.
SUPERLINEAR = 1.25


@dataclass(frozen=True)
class Config:
    tools: tuple[int, ...] = (100, 1000, 10_000)
    results: tuple[int, ...] = (10 * KIB, 100 * KIB, MIB, 10 * MIB)
    batches: tuple[int, ...] = (10, 100, 1000)
    reps: int = 7  # at least, per path and size
    min_cell_s: float = 0.5  # and more until each path's calls of a size took this long
    max_rounds: int = 300
    memory_reps: int = 3  # calls per size in the memory pass
    loop: str = "asyncio"

    @classmethod
    def tiny(cls, **overrides: Any) -> Config:
        return cls(
            **{"tools": (10, 20), "results": (KIB, 2 * KIB), "batches": (2, 4), "reps": 2}
            | overrides
        )


# ------------------------------------------------------------------ the clients


@dataclass
class Client:
    """One revision's client on one URL path, over one keep-alive connection."""

    conn: Conn
    path: str
    revision: str  # "2026-07-28", "2025-11-25" or "2025-03-26"
    headers: dict[str, str] = field(default_factory=dict)  # a session's

    async def open(self) -> None:
        if self.revision == "2026-07-28":
            return
        base = {"Content-Type": JSON, "Accept": f"{JSON}, text/event-stream"}
        reply = await self.conn.request(
            "POST", self.path, base, orjson.dumps(initialize(self.revision))
        )
        session_id = reply.headers.get("mcp-session-id")
        if reply.status != 200 or not session_id:
            raise BadReply(f"{self.path}: initialize: HTTP {reply.status}: {reply.body[:200]!r}")
        self.headers = {**base, "Mcp-Session-Id": session_id}
        if self.revision != BATCH_REVISION:
            self.headers["MCP-Protocol-Version"] = self.revision
        done = await self.conn.request("POST", self.path, self.headers, orjson.dumps(INITIALIZED))
        if done.status != 202:
            raise BadReply(f"{self.path}: initialized: HTTP {done.status}")

    async def post(self, message: Any, method: str, name: str | None = None) -> Reply:
        headers = modern_headers(method, name) if self.revision == "2026-07-28" else self.headers
        if self.conn.closed.done() or not self.conn.keep_alive:
            # The server ended an idle keep-alive connection (a session outlives it).
            self.conn = await Conn.open(self.conn.host, self.conn.port)
        reply = await self.conn.request("POST", self.path, headers, orjson.dumps(message))
        if reply.status != 200:
            raise BadReply(f"{self.path}: HTTP {reply.status}: {reply.body[:300]!r}")
        return reply

    def request(self, i: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.revision == "2026-07-28":
            if method == "tools/call":
                return modern_call(i, params["name"], params["arguments"])
            params = {**params, "_meta": modern_call(i, "", {})["params"]["_meta"]}
        return {"jsonrpc": "2.0", "id": i, "method": method, "params": params}

    async def list_tools(self, i: int, count: int) -> None:
        reply = await self.post(self.request(i, "tools/list", {}), "tools/list")
        listed = result_of(decode(reply.body, reply.content_type, i)).get("tools")
        if not isinstance(listed, list) or len(listed) != count:
            raise BadReply(f"{self.path}: listed {len(listed or [])} tools, not {count}")

    async def blob(self, i: int, size: int) -> None:
        params = {"name": "blob", "arguments": {"bytes": size}}
        reply = await self.post(self.request(i, "tools/call", params), "tools/call", "blob")
        content = result_of(decode(reply.body, reply.content_type, i)).get("content")
        if not (isinstance(content, list) and len(content[0].get("text", "")) == size):
            raise BadReply(f"{self.path}: blob of {size} bytes did not come back whole")

    async def batch(self, i: int, count: int) -> None:
        calls = [
            self.request(i + n, "tools/call", {"name": "echo", "arguments": {"text": f"b{n}"}})
            for n in range(count)
        ]
        reply = await self.post(calls, "tools/call")
        answers = orjson.loads(reply.body)
        if not isinstance(answers, list) or len(answers) != count:
            raise BadReply(f"{self.path}: {len(answers)} answers to a batch of {count}")
        texts = {a["id"]: a["result"]["content"][0]["text"] for a in answers if "result" in a}
        if texts != {i + n: f"b{n}" for n in range(count)}:
            raise BadReply(f"{self.path}: the batch's answers do not match: {reply.body[:300]!r}")


# ------------------------------------------------------------------ paths and cells


@dataclass(frozen=True)
class Path_:
    label: str
    direct: bool
    revision: str
    era: str  # "modern" or "legacy": the upstream's


def paths_of(measure: str) -> list[Path_]:
    if measure == "batches":
        return [
            Path_(
                "2025-03-26 client -> gateway -> modern (batch)", False, BATCH_REVISION, "modern"
            ),
            Path_(
                "2025-03-26 client -> gateway -> legacy (batch)", False, BATCH_REVISION, "legacy"
            ),
        ]
    return [
        Path_("2026-07-28 client -> modern upstream, direct", True, "2026-07-28", "modern"),
        Path_("2026-07-28 client -> gateway -> modern", False, "2026-07-28", "modern"),
        Path_("2025-11-25 client -> gateway -> modern", False, LEGACY, "modern"),
        Path_("2025-11-25 client -> legacy upstream, direct", True, LEGACY, "legacy"),
        Path_("2025-11-25 client -> gateway -> legacy", False, LEGACY, "legacy"),
        Path_("2026-07-28 client -> gateway -> legacy", False, "2026-07-28", "legacy"),
    ]


@dataclass
class Cell:
    wall_s: list[float] = field(default_factory=list)
    # The gateway's CPU over all the calls (/proc counts in clock ticks, 10 ms: one
    # call's own reading is too coarse; the mean of several is not).
    cpu_s: float = 0.0
    peak_kib: list[float] = field(default_factory=list)

    def summary(self, size: int, unit: float) -> dict[str, Any]:
        units = size / unit
        wall = statistics.median(self.wall_s)
        cpu = self.cpu_s / len(self.wall_s) if self.cpu_s or self.peak_kib else None
        peak = statistics.median(self.peak_kib) if self.peak_kib else None
        return {
            "size": size,
            "calls": len(self.wall_s),
            "wall_ms": round(wall * 1e3, 3),
            "gateway_cpu_ms": None if cpu is None else round(cpu * 1e3, 3),
            "peak_kib": None if peak is None else round(peak, 1),
            "wall_us_per_unit": round(wall * 1e6 / units, 3),
            "cpu_us_per_unit": None if cpu is None else round(cpu * 1e6 / units, 3),
            "peak_kib_per_unit": None if peak is None else round(peak / units, 4),
        }


def _reset_peak(pid: int) -> None:
    """The process's peak RSS (VmHWM) starts again from its RSS now."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {key} for process {pid}")


@dataclass
class Bench:
    config: Config
    gateway: Proc
    gw_port: int
    up_port: int
    memory: bool = False  # the memory pass: this gateway serves one path only
    clients: dict[tuple[str, str, int], Client] = field(default_factory=dict)
    ids: int = 1

    async def client(self, path: Path_, count: int) -> Client:
        """The path's client for the route of ``count`` tools (made and opened once)."""
        key = (path.label, path.era, count)
        client = self.clients.get(key)
        if client is None:
            port = self.up_port if path.direct else self.gw_port
            url = f"/{path.era}/{count}" if path.direct else f"/{path.era[0]}{count}"
            client = Client(await Conn.open(HOST, port), url, path.revision)
            await client.open()
            self.clients[key] = client
        return client

    async def call(self, path: Path_, measure: str, size: int, cell: Cell | None) -> None:
        count = size if measure == "tools" else self.config.tools[0]
        client = await self.client(path, count)
        self.ids += 10_000
        do: Callable[[], Awaitable[None]]
        if measure == "tools":
            do = lambda: client.list_tools(self.ids, size)  # noqa: E731
        elif measure == "results":
            do = lambda: client.blob(self.ids, size)  # noqa: E731
        else:
            do = lambda: client.batch(self.ids, size)  # noqa: E731
        if cell is None or self.memory:
            await do()
        else:
            cpu = self.gateway.cpu_seconds()
            began = time.perf_counter()
            await do()
            cell.wall_s.append(time.perf_counter() - began)
            if not path.direct:
                cell.cpu_s += self.gateway.cpu_seconds() - cpu

    async def measure(self, measure: str, sizes: tuple[int, ...], cells: dict[Any, Cell]) -> None:
        """Rounds of one call per path (the order rotating), at least ``reps`` of them and
        until every path's calls took ``min_cell_s`` in all: the gateway's CPU is read in
        clock ticks (10 ms), so small calls need many to be read at all."""
        paths = paths_of(measure)
        config = self.config
        for size in sizes:
            for path in paths:
                await self.call(path, measure, size, None)  # warm-up (first list, first session)
            mine = [cells.setdefault((measure, p.label, size), Cell()) for p in paths]
            rounds = 0
            while rounds < config.reps or (
                rounds < config.max_rounds and min(sum(c.wall_s) for c in mine) < config.min_cell_s
            ):
                shift = rounds % len(paths)
                for path in paths[shift:] + paths[:shift]:
                    await self.call(path, measure, size, cells[(measure, path.label, size)])
                rounds += 1

    async def memory_of(
        self, path: Path_, measure: str, sizes: tuple[int, ...], cells: dict[Any, Cell]
    ) -> None:
        """In a gateway of its own, sizes ascending: how far each size's calls raised the
        gateway's peak RSS above its RSS before the first of them."""
        pid = self.gateway.pid
        for size in sizes:
            _reset_peak(pid)
            before = _status_kib(pid, "VmRSS")
            for _ in range(self.config.memory_reps):
                await self.call(path, measure, size, None)
            cell = cells.setdefault((measure, path.label, size), Cell())
            cell.peak_kib.append(_status_kib(pid, "VmHWM") - before)

    def close(self) -> None:
        for client in self.clients.values():
            client.conn.close()


def linearity(points: list[dict[str, Any]], direct: bool) -> dict[str, Any]:
    """Marginal cost per unit between consecutive sizes, and the last step's log-log
    slope, for wall time (and, through the gateway, its CPU and peak RSS)."""
    out: dict[str, Any] = {}
    keys = ["wall_ms"] if direct else ["wall_ms", "gateway_cpu_ms", "peak_kib"]
    for key in keys:
        values = [(p["size"], p[key]) for p in points]
        marginal = [
            round((b - a) / (s2 - s1), 9) if s2 != s1 else None
            for (s1, a), (s2, b) in itertools.pairwise(values)
        ]
        (s1, a), (s2, b) = values[-2], values[-1]
        slope = math.log(b / a) / math.log(s2 / s1) if a and b and a > 0 and b > 0 else None
        out[key.removesuffix("_ms")] = {
            "marginal_per_size_unit": marginal,
            "last_step_slope": None if slope is None else round(slope, 3),
            "superlinear": slope is not None and slope > SUPERLINEAR,
        }
    return out


MEASURES = ("tools", "results", "batches")


def calibration(sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    """What this machine itself pays per KiB to parse and encode a result of each size
    (orjson, in this process, best of 5): copies of megabytes cost more per byte than
    copies of kilobytes (caches, fresh pages), whoever makes them."""
    points = []
    for size in sizes:
        message = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"text": "x" * size}]}}
        raw = orjson.dumps(message)
        best = math.inf
        for _ in range(5):
            began = time.perf_counter()
            orjson.dumps(orjson.loads(raw))
            best = min(best, time.perf_counter() - began)
        points.append({"size": size, "us_per_kib": round(best * 1e6 / (size / KIB), 4)})
    (s1, a), (s2, b) = [(p["size"], p["us_per_kib"] * p["size"]) for p in points[-2:]]
    return [*points, {"last_step_slope": round(math.log(b / a) / math.log(s2 / s1), 3)}]


def tool_index(sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    """What one caller's tool index (gateway/upstream/tools.py) keeps of a list of each
    size once the list itself is gone, taught as a handshake-era upstream's list
    teaches it (in this process, tracemalloc): bytes per tool, and tools still known."""
    from bench.sized import tools
    from gateway.core import Value
    from gateway.protocol import AdapterSet
    from gateway.upstream.tools import ToolBook

    adapters = AdapterSet.default()
    points = []
    for size in sizes:
        raw = orjson.dumps({"tools": tools(size)})
        tracemalloc.start()
        try:
            index = ToolBook(adapters.stateless[0]).of("bench")
            index.learn(
                adapters.by_version["2025-11-25"], Value(orjson.loads(raw)), param_headers=False
            )
            kept, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        known = sum(index.known(tool["name"]) is not None for tool in orjson.loads(raw)["tools"])
        points.append({"size": size, "bytes_per_tool": round(kept / size, 1), "known": known})
    return points


UNITS = {"tools": ("tool", 1), "results": ("KiB", KIB), "batches": ("message", 1)}


async def _run(config: Config, lab: Lab, timed: Bench) -> dict[str, Any]:
    cells: dict[Any, Cell] = {}
    try:
        for measure in MEASURES:
            await timed.measure(measure, getattr(config, measure), cells)
    finally:
        timed.close()
    for measure in MEASURES:
        for path in paths_of(measure):
            if path.direct:
                continue
            # A gateway of its own for each path and measure: memory another size or path
            # left behind (freed, but kept by the allocator) would hide what this one takes.
            proc = _gateway(lab, config, timed.up_port, "gateway-memory", [])
            alone = Bench(config, proc, _port(proc), timed.up_port, memory=True)
            try:
                await alone.memory_of(path, measure, getattr(config, measure), cells)
            finally:
                alone.close()
                proc.stop()
    report: dict[str, Any] = {}
    for measure in MEASURES:
        unit = UNITS[measure][1]
        rows = []
        for path in paths_of(measure):
            sizes = getattr(config, measure)
            points = [cells[(measure, path.label, size)].summary(size, unit) for size in sizes]
            row = {"path": path.label, "direct": path.direct, "points": points}
            rows.append(row | linearity(points, path.direct))
        report[measure] = rows
    return report


def _gateway(lab: Lab, config: Config, up_port: int, name: str, launch: list[str]) -> Proc:
    base = f"http://{HOST}:{up_port}"
    routes: list[str] = []
    for count in sorted({*config.tools}):
        routes += ["--route", f"/m{count}={base}/modern/{count}"]
        routes += ["--route", f"/l{count}={base}/legacy/{count}"]
    env = {"GATEWAY_MAX_BATCH": str(max(config.batches)), "GATEWAY_MAX_BODY_BYTES": str(64 * MIB)}
    uvloop = config.loop == "uvloop"
    first = f"{base}/modern/{config.tools[0]}"
    gw = lab.gateway(name, first, uvloop=uvloop, extra=routes, env=env, launch=launch)
    return gw.proc


def _port(proc: Proc) -> int:
    argv = proc.process.args
    assert isinstance(argv, list)
    return int(str(argv[argv.index("--listen") + 1]).rsplit(":", 1)[1])


def start(lab: Lab, config: Config) -> Bench:
    """The upstream, and a gateway for time and CPU."""
    up_port = free_port()
    upstream = lab._spawn("sized", [sys.executable, "-m", "bench.sized", str(up_port)])
    _wait_port(up_port, 30.0, upstream)
    timed = _gateway(lab, config, up_port, "gateway", [])
    return Bench(config, timed, _port(timed), up_port)


def run(config: Config) -> dict[str, Any]:
    lab = Lab()
    load_before = _loadavg()
    busy = busy_cpu_s()
    began = time.perf_counter()
    try:
        timed = start(lab, config)
        measures = asyncio.run(_run(config, lab, timed))
    finally:
        lab.close()
    wall = time.perf_counter() - began
    return {
        "machine": machine(),
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in config.__dict__.items()},
        "load_average_before": load_before,
        "load_average_after": _loadavg(),
        "machine_busy_cores": round((busy_cpu_s() - busy) / wall, 2),
        "wall_s": round(wall, 1),
        "superlinear_slope": SUPERLINEAR,
        "calibration": calibration(config.results),
        "tool_index": tool_index(config.tools),
        "measures": measures,
    }


def _size(measure: str, size: int) -> str:
    if measure != "results":
        return f"{size:,}"
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


def render(report: dict[str, Any]) -> str:
    m, c = report["machine"], report["config"]
    lines = [
        f"gateway cost per unit of size: {m['cpus']} CPUs ({m['cpu_model']}), Python "
        f"{m['python']}, aiohttp {m['aiohttp']}, gateway --loop {c['loop']}; time: median of "
        f"at least {c['reps']} calls per cell (more until they took {c['min_cell_s']} s); "
        f"memory: {c['memory_reps']} calls per size, a gateway per path",
        f"load average before {report['load_average_before']}, after "
        f"{report['load_average_after']}; the whole machine busy {report['machine_busy_cores']} "
        f"cores on average; {report['wall_s']} s wall",
        "ms: wall time per call (client to answer, parsing included); gwCPU: the gateway's CPU "
        "per call (ms, mean); peak: how far that size's calls raised the gateway's peak RSS above "
        "its RSS before them (KiB; a gateway per path, sizes ascending); per unit: us of wall / "
        "us of gateway CPU / KiB of "
        "peak per unit; slope: log-log slope of the last step (1 = linear; '!' above "
        f"{report['superlinear_slope']})",
    ]
    header = (
        f"{'path':<48} {'size':>8} {'ms':>9} {'gwCPU':>8} {'peak':>8} {'us/u':>8} "
        f"{'cpu us/u':>9} {'KiB/u':>8}"
    )
    *points, slope = report["calibration"]
    lines += [
        "",
        "this machine, orjson parse + encode of the same results in one process (us/KiB): "
        + ", ".join(f"{_size('results', p['size'])} {p['us_per_kib']:.3f}" for p in points)
        + f"; slope of the last step {slope['last_step_slope']:.2f}",
    ]
    lines.append(
        "one caller's tool index, kept once a list is read (in this process): "
        + ", ".join(
            f"{p['size']:,} tools: {p['bytes_per_tool']:.0f} B/tool, {p['known']:,} known"
            for p in report["tool_index"]
        )
    )
    for measure, rows in report["measures"].items():
        lines += ["", f"{measure} (unit: {UNITS[measure][0]})", header]
        for row in rows:
            lines += [_point(row["path"], measure, p) for p in row["points"]]
            slopes = ", ".join(
                f"{key} {_opt(v['last_step_slope'], '.2f')}{' !' if v['superlinear'] else ''}"
                for key, v in row.items()
                if isinstance(v, dict)
            )
            lines.append(f"{'':<48} slope of the last step: {slopes}")
    return "\n".join(lines)


def _point(path: str, measure: str, p: dict[str, Any]) -> str:
    return (
        f"{path:<48} {_size(measure, p['size']):>8} {p['wall_ms']:>9.2f} "
        f"{_opt(p['gateway_cpu_ms'], '.2f'):>8} {_opt(p['peak_kib'], '.0f'):>8} "
        f"{p['wall_us_per_unit']:>8.2f} {_opt(p['cpu_us_per_unit'], '.2f'):>9} "
        f"{_opt(p['peak_kib_per_unit'], '.3f'):>8}"
    )


def _opt(value: Any, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.size", description="Cost per unit of size."
    )
    parser.add_argument("--tiny", action="store_true", help="the smallest sizes (smoke test)")
    parser.add_argument("--reps", type=int, help="calls per path and size (7; tiny 2)")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {"loop": args.loop}
    if args.reps:
        overrides["reps"] = args.reps
    config = Config.tiny(**overrides) if args.tiny else Config(**overrides)
    signal.signal(signal.SIGTERM, _on_sigterm)
    raise_fd_limit()
    report = run(config)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
