"""Where the gateway spends its time on a cross-era call (a 2026-07-28 client, the
demo server upstream): on asyncio's loop and on uvloop, each sampled by py-spy
(if installed) and traced by cProfile, four gateways one after the other.

Each gateway gets a warm-up, then the measured calls, then SIGTERM.  py-spy
samples the running process from outside (100 Hz, by function; a C call such
as ``socket.send`` counts as its Python caller's own time) and barely slows
it; cProfile inflates every Python call, so its CPU per call is higher than in
the ratio table: read its shares, and its call counts (a coroutine counts one
call per resumption).
"""

from __future__ import annotations

import asyncio
import contextlib
import pstats
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from bench.load import run_load
from bench.procs import REPO, Lab, Mid
from bench.wire import ModernClient


async def _drive(
    gateway: Mid, calls: int, callers: int, on_warm: Callable[[], object] | None = None
) -> dict[str, Any]:
    """Warm-up, then ``on_warm`` (starts py-spy), then the measured calls."""
    connector = aiohttp.TCPConnector(limit=callers, limit_per_host=callers)
    async with aiohttp.ClientSession(connector=connector) as http:
        client = ModernClient(http, gateway.url)
        warm = await run_load(
            client.echo, total=200, concurrency=callers, time_cap_s=30, call_timeout_s=10
        )
        if warm.errors:
            raise RuntimeError(f"warm-up failed: {warm.first_error}")
        if on_warm is not None:
            on_warm()
        cpu0 = gateway.proc.cpu_seconds()
        result = await run_load(
            client.echo, total=calls, concurrency=callers, time_cap_s=60, call_timeout_s=10
        )
        cpu = gateway.proc.cpu_seconds() - cpu0
    return {
        "calls": result.ok,
        "errors": result.errors,
        "throughput_rps": round(result.throughput, 1),
        "gateway_cpu_us_per_call": round(cpu / result.ok * 1e6, 1) if result.ok else None,
    }


def _py_spy() -> str | None:
    return shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))


def profile(calls: int, callers: int, log_level: str, top: int = 15) -> dict[str, Any]:
    lab = Lab(gateway_log_level=log_level)
    out: dict[str, Any] = {"calls": calls, "callers": callers, "runs": {}}
    py_spy = _py_spy()
    try:
        upstream = lab.upstream("legacy")
        for loop in ("asyncio", "uvloop"):
            if py_spy is not None:
                out["runs"][f"py-spy, {loop}"] = _sampled(
                    lab, upstream.url, loop, py_spy, calls, callers, top
                )
            path = lab.workdir / f"gateway-{loop}.prof"
            gateway = lab.gateway(
                f"gateway-cprofile-{loop}", upstream.url, uvloop=loop == "uvloop", profile_path=path
            )
            load = asyncio.run(_drive(gateway, calls, callers))
            gateway.proc.stop()  # SIGTERM: the gateway drains and the profile is written
            out["runs"][f"cProfile, {loop}"] = {"load": load, **profile_summary(path, top)}
    finally:
        lab.close()
    return out


def _sampled(
    lab: Lab, upstream: str, loop: str, py_spy: str, calls: int, callers: int, top: int
) -> dict[str, Any]:
    gateway = lab.gateway(f"gateway-pyspy-{loop}", upstream, uvloop=loop == "uvloop")
    raw = lab.workdir / f"gateway-{loop}.pyspy.txt"
    argv = [py_spy, "record", "--pid", str(gateway.proc.pid), "--function", "--format", "raw"]
    spies: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        log = open(lab.workdir / f"py-spy-{loop}.log", "wb")  # noqa: SIM115 (closed below)
        spies.append(
            subprocess.Popen(
                [*argv, "--rate", "100", "--output", str(raw)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        )
        log.close()  # the child holds its own descriptor

    try:
        load = asyncio.run(_drive(gateway, calls, callers, on_warm=start))
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes what it has on Ctrl-C
            with contextlib.suppress(subprocess.TimeoutExpired):
                spy.wait(20)
            if spy.poll() is None:
                spy.kill()
                spy.wait(5)
        gateway.proc.stop()
    return {"load": load, **samples_summary(raw, top)}


def samples_summary(path: Path, top: int = 15) -> dict[str, Any]:
    """Own samples (the leaf frame) and inclusive samples per function, from py-spy's
    raw (collapsed stacks) output."""
    if not path.exists():
        return {"error": f"py-spy wrote nothing at {path}"}
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_FRAME_PATH.sub(lambda m: "(" + _short(m[1]) + ")", f) for f in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    groups: Counter[str] = Counter()
    for frame, count in own.items():
        groups[_group(frame)] += count
    return {
        "samples": total,
        "by_library_pct": {name: round(100 * n / total, 1) for name, n in groups.most_common()}
        if total
        else {},
        "hottest": [
            {
                "function": frame,
                "own_samples": n,
                "pct": round(100 * n / total, 1),
                "inclusive_pct": round(100 * inclusive[frame] / total, 1),
            }
            for frame, n in own.most_common(top)
        ],
    }


# Time the loop spends waiting (or, for uvloop, in its C code, waiting included).
_IDLE = ("'poll' of 'select.epoll'", "of 'uvloop.Loop' objects")
_PREFIX = re.compile(r"^.*?/(site-packages|lib/python3\.\d+)/|^" + re.escape(str(REPO)) + "/")
_FRAME_PATH = re.compile(r"\(([^()]*)\)$")  # py-spy: "function (path:line)"
_GROUPS = (
    ("gateway", ("gateway/",)),
    ("structlog + logging", ("structlog", "logging/")),
    ("prometheus_client", ("prometheus_client",)),
    ("pydantic", ("pydantic",)),
    ("aiohttp + multidict + yarl", ("aiohttp", "multidict", "yarl")),
    ("asyncio + selectors", ("asyncio/", "selectors", "uvloop")),
    ("json (orjson, json)", ("orjson", "json/")),
)


def profile_summary(path: Path, top: int = 15) -> dict[str, Any]:
    """The gateway's own time (tottime) by library, and its hottest functions."""
    if not path.exists():
        return {"error": f"no profile written at {path} (the gateway did not exit cleanly)"}
    stats = pstats.Stats(str(path))
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = getattr(
        stats, "stats", {}
    )
    idle_keys = [key for key in raw if any(mark in key[2] for mark in _IDLE)]
    idle = sum(raw[key][2] for key in idle_keys)
    raw = {key: entry for key, entry in raw.items() if key not in idle_keys}
    total = sum(entry[2] for entry in raw.values()) or 1.0
    groups: dict[str, float] = {}
    for (filename, _line, _name), entry in raw.items():
        group = next(
            (label for label, keys in _GROUPS if any(k in filename for k in keys)), "other"
        )
        if filename == "~":  # built-ins: socket calls, dict ops ...
            group = "built-ins (C calls)"
        groups[group] = groups.get(group, 0.0) + entry[2]
    hottest = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:top]
    return {
        "busy_s": round(total, 3),
        "left_out_s": round(idle, 3),
        "left_out": [key[2] for key in idle_keys],
        "by_library_pct": {
            name: round(100 * seconds / total, 1)
            for name, seconds in sorted(groups.items(), key=lambda kv: -kv[1])
        },
        "hottest": [
            {
                "function": f"{_short(filename)}:{line}({name})",
                "calls": entry[1],
                "tottime_s": round(entry[2], 3),
                "pct": round(100 * entry[2] / total, 1),
                "cumtime_s": round(entry[3], 3),
            }
            for (filename, line, name), entry in hottest
        ],
    }


def _group(frame: str) -> str:
    return next((label for label, keys in _GROUPS if any(k in frame for k in keys)), "other")


def _short(filename: str) -> str:
    return _PREFIX.sub("", filename)


def render_profile(report: dict[str, Any]) -> str:
    lines = [
        f"gateway profile: {report['calls']} cross-era tools/call echo (2026-07-28 client -> "
        f"gateway -> demo 2025-11-25 upstream), {report['callers']} callers, after 200 warm-up",
        "",
    ]
    for name, data in report["runs"].items():
        if "error" in data:
            lines += [f"{name}: {data['error']}", ""]
            continue
        load = data["load"]
        lines.append(
            f"{name}: {load['throughput_rps']:.0f} req/s, gateway "
            f"{load['gateway_cpu_us_per_call']:.0f} us CPU/call (profiler included)"
        )
        if "samples" in data:
            lines.append(f"  {data['samples']} samples (busy only)")
        else:
            lines.append(
                f"  busy {data['busy_s']:.2f} s; left out {data['left_out_s']:.2f} s in "
                + (", ".join(data["left_out"]) or "nothing")
            )
        lines.append(
            "  own time by library: "
            + ", ".join(f"{lib} {pct:.0f}%" for lib, pct in data["by_library_pct"].items())
        )
        lines += _hottest(data["hottest"], "samples" in data)
        lines.append("")
    return "\n".join(lines)


def _hottest(hottest: list[dict[str, Any]], sampled: bool) -> list[str]:
    if sampled:
        lines = [f"  {'own %':>6} {'incl %':>6} {'samples':>7}  function"]
        lines += [
            f"  {e['pct']:6.1f} {e['inclusive_pct']:6.1f} {e['own_samples']:7d}  {e['function']}"
            for e in hottest
        ]
        return lines
    lines = [f"  {'own s':>7} {'own %':>6} {'cum s':>7} {'calls':>8}  function"]
    lines += [
        f"  {e['tottime_s']:7.3f} {e['pct']:6.1f} {e['cumtime_s']:7.3f} {e['calls']:8d}  "
        f"{e['function']}"
        for e in hottest
    ]
    return lines
