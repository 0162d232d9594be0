"""Where the gateway spends its time on a cross-era call (a 2026-07-28 client, the
demo server upstream), under cProfile: once on asyncio's loop, once on uvloop.

Each gateway gets a warm-up, then the measured calls, then SIGTERM; the
profile is written as it exits.  cProfile inflates every Python call, so the
CPU per call here is higher than in the ratio table: read the shares.
"""

from __future__ import annotations

import asyncio
import pstats
import re
from pathlib import Path
from typing import Any

import aiohttp

from bench.load import run_load
from bench.procs import REPO, Lab, Mid
from bench.wire import ModernClient


async def _drive(gateway: Mid, calls: int, callers: int) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=callers, limit_per_host=callers)
    async with aiohttp.ClientSession(connector=connector) as http:
        client = ModernClient(http, gateway.url)
        warm = await run_load(
            client.echo, total=200, concurrency=callers, time_cap_s=30, call_timeout_s=10
        )
        if warm.errors:
            raise RuntimeError(f"warm-up failed: {warm.first_error}")
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


def profile(calls: int, callers: int, log_level: str, top: int = 15) -> dict[str, Any]:
    lab = Lab(gateway_log_level=log_level)
    out: dict[str, Any] = {"calls": calls, "callers": callers, "loops": {}}
    try:
        upstream = lab.upstream("legacy")
        for loop in ("asyncio", "uvloop"):
            path = lab.workdir / f"gateway-{loop}.prof"
            gateway = lab.gateway(
                f"gateway-{loop}", upstream.url, uvloop=loop == "uvloop", profile_path=path
            )
            load = asyncio.run(_drive(gateway, calls, callers))
            gateway.proc.stop()  # SIGTERM: the gateway drains and the profile is written
            out["loops"][loop] = {"load": load, **profile_summary(path, top)}
    finally:
        lab.close()
    return out


# Time the loop spends waiting (or, for uvloop, in its C code, waiting included).
_IDLE = ("'poll' of 'select.epoll'", "of 'uvloop.Loop' objects")
_PREFIX = re.compile(r"^.*?/(site-packages|lib/python3\.\d+)/|^" + re.escape(str(REPO)) + "/")
_GROUPS = (
    ("gateway", ("/gateway/",)),
    ("structlog + logging", ("structlog", "/logging/")),
    ("prometheus_client", ("prometheus_client",)),
    ("pydantic", ("pydantic",)),
    ("aiohttp + multidict + yarl", ("aiohttp", "multidict", "yarl")),
    ("asyncio + selectors", ("/asyncio/", "selectors")),
    ("json (orjson, json)", ("orjson", "/json/")),
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


def _short(filename: str) -> str:
    return _PREFIX.sub("", filename)


def render_profile(report: dict[str, Any]) -> str:
    lines = []
    for loop, data in report["loops"].items():
        if "error" in data:
            lines.append(f"{loop}: {data['error']}")
            continue
        load = data["load"]
        lines += [
            f"gateway on {loop}, under cProfile: {load['calls']} cross-era echo calls "
            f"(2026-07-28 client -> demo 2025-11-25), {report['callers']} callers, "
            f"{load['throughput_rps']:.0f} req/s, {load['gateway_cpu_us_per_call']:.0f} us "
            f"CPU/call (profiler included)",
            f"  busy {data['busy_s']:.2f} s; left out {data['left_out_s']:.2f} s in "
            + ", ".join(data["left_out"]),
            "  by library: "
            + ", ".join(f"{name} {pct:.0f}%" for name, pct in data["by_library_pct"].items()),
            f"  {'own s':>7} {'own %':>6} {'cum s':>7} {'calls':>8}  function",
        ]
        for entry in data["hottest"]:
            lines.append(
                f"  {entry['tottime_s']:7.3f} {entry['pct']:6.1f} {entry['cumtime_s']:7.3f} "
                f"{entry['calls']:8d}  {entry['function']}"
            )
        lines.append("")
    return "\n".join(lines)
