"""The benchmark: start the processes, run the phases, collect the figures."""

from __future__ import annotations

import asyncio
import os
import platform
import pstats
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.load import LoadResult, run_load
from bench.procs import REPO, Proc, Stack
from bench.wire import LegacyClient, ModernClient


@dataclass(frozen=True)
class Config:
    sequential: int = 2000
    concurrent: int = 5000
    concurrency: int = 32
    warmup: int = 200
    park: int = 2000
    park_concurrency: int = 32
    phase_cap_s: float = 60.0  # no call of a phase starts after this
    call_timeout_s: float = 10.0
    park_timeout_s: float = 5.0
    gateway_log_level: str = "info"

    @classmethod
    def quick(cls, gateway_log_level: str = "info") -> Config:
        return cls(
            sequential=200,
            concurrent=500,
            warmup=20,
            park=200,
            phase_cap_s=5.0,
            call_timeout_s=5.0,
            park_timeout_s=2.0,
            gateway_log_level=gateway_log_level,
        )


class OutsideSignal(RuntimeError):
    """The gateway was stopped by something other than the benchmark."""


# (label, client revision, through the gateway?)
SCENARIOS = (
    ("2025-11-25 client, direct to upstream", "2025-11-25", False),
    ("2025-11-25 client, via gateway", "2025-11-25", True),
    ("2026-07-28 client, via gateway", "2026-07-28", True),
)


def _connector(limit: int) -> aiohttp.TCPConnector:
    return aiohttp.TCPConnector(limit=limit, limit_per_host=limit, force_close=False)


def _check(stack: Stack) -> None:
    for proc in (stack.upstream, stack.gateway):
        proc.check_alive()
    if '"event": "shutting down"' in stack.gateway.log_path.read_text(errors="replace"):
        raise OutsideSignal(
            "the gateway received SIGTERM/SIGINT from outside the benchmark (see "
            f"{stack.gateway.log_path}); its figures are void, run again"
        )


async def _measured(
    stack: Stack,
    call: Callable[[int], Awaitable[None]],
    *,
    total: int,
    concurrency: int,
    config: Config,
    first_id: int,
) -> dict[str, Any]:
    procs: dict[str, Proc] = {"gateway": stack.gateway, "upstream": stack.upstream}
    cpu0 = {name: proc.cpu_seconds() for name, proc in procs.items()}
    client0 = time.process_time()
    result = await run_load(
        call,
        total=total,
        concurrency=concurrency,
        time_cap_s=config.phase_cap_s,
        call_timeout_s=config.call_timeout_s,
        first_id=first_id,
    )
    cpu = {name: proc.cpu_seconds() - cpu0[name] for name, proc in procs.items()}
    cpu["client"] = time.process_time() - client0
    summary = result.summary()
    summary["concurrency"] = concurrency
    summary["cpu_s"] = {name: round(seconds, 3) for name, seconds in cpu.items()}
    summary["cpu_us_per_call"] = {
        name: round(seconds / result.ok * 1e6, 1) if result.ok else None
        for name, seconds in cpu.items()
    }
    return summary


async def _scenario(
    stack: Stack, label: str, revision: str, via_gateway: bool, config: Config
) -> dict[str, Any]:
    url = stack.gateway_url if via_gateway else stack.upstream_url
    runs: dict[str, Any] = {}
    limit = max(config.concurrency, 1)
    async with aiohttp.ClientSession(connector=_connector(limit)) as http:
        client: ModernClient | LegacyClient
        if revision == "2026-07-28":
            client = ModernClient(http, url)
        else:
            client = LegacyClient(http, url)
            await client.initialize()  # once: every call below reuses the session
        warm = await run_load(
            client.echo,
            total=config.warmup,
            concurrency=min(8, limit),
            time_cap_s=config.phase_cap_s,
            call_timeout_s=config.call_timeout_s,
        )
        if warm.errors:
            raise RuntimeError(f"{label}: warm-up failed: {warm.first_error}")
        runs["sequential"] = await _measured(
            stack,
            client.echo,
            total=config.sequential,
            concurrency=1,
            config=config,
            first_id=1_000_000,
        )
        runs["concurrent"] = await _measured(
            stack,
            client.echo,
            total=config.concurrent,
            concurrency=config.concurrency,
            config=config,
            first_id=2_000_000,
        )
    _check(stack)
    return {"label": label, "client": revision, "via_gateway": via_gateway, **runs}


async def _parked_gauge(http: aiohttp.ClientSession, stack: Stack) -> float | None:
    """`gateway_parked_calls` from the gateway's /metrics."""
    url = stack.gateway_url.removesuffix("/mcp") + "/metrics"
    try:
        async with asyncio.timeout(5), http.get(url) as resp:
            text = await resp.text()
    except (aiohttp.ClientError, TimeoutError):
        return None
    total = 0.0
    for line in text.splitlines():
        if line.startswith("gateway_parked_calls{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def _park(stack: Stack, config: Config) -> dict[str, Any]:
    """Abandoned `greet_me` calls of a 2026-07-28 client: each answered input_required
    (the upstream's elicitation parked in the gateway) and never retried."""
    rss_before = stack.gateway.rss_kib()
    upstream_before = stack.upstream.rss_kib()
    async with aiohttp.ClientSession(connector=_connector(config.park_concurrency)) as http:
        client = ModernClient(http, stack.gateway_url)
        result: LoadResult = await run_load(
            client.greet_and_abandon,
            total=config.park,
            concurrency=config.park_concurrency,
            time_cap_s=config.phase_cap_s,
            call_timeout_s=config.park_timeout_s,
            stop_on_error=True,  # a stall shows at the first timeout; do not wait out the rest
            first_id=3_000_000,
        )
        await asyncio.sleep(0.5)  # let the gateway settle (expiry timers, buffers)
        parked = await _parked_gauge(http, stack)
        rss_after = stack.gateway.rss_kib()
        # Is the route still usable for an ordinary call, with those calls parked?
        echo_ok = True
        echo_error = ""
        try:
            async with asyncio.timeout(min(3.0, config.park_timeout_s + 1)):
                await client.echo(4_000_000)
        except Exception as exc:  # a stalled route times out
            echo_ok = False
            echo_error = f"{type(exc).__name__}: {exc}"[:200]
    _check(stack)
    count = int(parked) if parked is not None else result.ok
    growth = rss_after - rss_before
    return {
        "attempted": result.requests,
        "answered_input_required": result.ok,
        "failed": result.errors,
        "first_error": result.first_error,
        "parked_gauge": parked,
        "elapsed_s": round(result.elapsed_s, 3),
        "gateway_rss_kib_before": rss_before,
        "gateway_rss_kib_after": rss_after,
        "gateway_rss_growth_kib": growth,
        "kib_per_parked_call": round(growth / count, 2) if count else None,
        "upstream_rss_growth_kib": stack.upstream.rss_kib() - upstream_before,
        "echo_after_parking_ok": echo_ok,
        **({"echo_after_parking_error": echo_error} if echo_error else {}),
    }


def _machine() -> dict[str, Any]:
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


async def _run(stack: Stack, config: Config) -> dict[str, Any]:
    gateway = stack.gateway
    rss_start = gateway.rss_kib()
    cpu_start = gateway.cpu_seconds()
    wall_start = time.perf_counter()
    scenarios = [
        await _scenario(stack, label, revision, via, config) for label, revision, via in SCENARIOS
    ]
    load_wall = time.perf_counter() - wall_start
    cpu_load = gateway.cpu_seconds() - cpu_start
    rss_after_load = gateway.rss_kib()
    parking = await _park(stack, config)
    return {
        "machine": _machine(),
        "config": config.__dict__,
        "scenarios": scenarios,
        "gateway": {
            "pid": gateway.pid,
            "rss_kib_start": rss_start,
            "rss_kib_after_load": rss_after_load,
            "rss_kib_after_parking": parking["gateway_rss_kib_after"],
            "cpu_s_during_load": round(cpu_load, 3),
            "load_wall_s": round(load_wall, 3),
        },
        "parking": parking,
    }


def run(config: Config, *, profile: bool = False) -> dict[str, Any]:
    """Start everything, measure, stop everything (also on error or interrupt).

    With ``profile`` the gateway runs under cProfile (slower: its timings then
    show where it spends time, not how fast it is) and the report gains its
    hottest functions.
    """
    stack = Stack(gateway_log_level=config.gateway_log_level)
    if profile:
        stack.profile_path = stack.workdir / "gateway.prof"
    try:
        stack.start()
        _check(stack)
        report = asyncio.run(_run(stack, config))
    finally:
        stack.close()
    if stack.profile_path is not None:
        report["profile"] = profile_summary(stack.profile_path)
    return report


_IDLE = "'poll' of 'select.epoll'"
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


def profile_summary(path: Path, top: int = 20) -> dict[str, Any]:
    """The gateway's own time (tottime) by library, and its hottest functions."""
    if not path.exists():
        return {"error": f"no profile written at {path} (the gateway did not exit cleanly)"}
    stats = pstats.Stats(str(path))
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = getattr(
        stats, "stats", {}
    )
    # Waiting in epoll is the process being idle, not working: left out of the shares.
    idle = sum(entry[2] for key, entry in raw.items() if _IDLE in key[2])
    raw = {key: entry for key, entry in raw.items() if _IDLE not in key[2]}
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
        "total_s": round(total, 3),
        "idle_s": round(idle, 3),
        "by_library_pct": {
            name: round(100 * seconds / total, 1)
            for name, seconds in sorted(groups.items(), key=lambda kv: -kv[1])
        },
        "hottest": [
            {
                "function": f"{_short(filename)}:{line}({name})",
                "calls": entry[1],
                "tottime_s": round(entry[2], 3),
                "cumtime_s": round(entry[3], 3),
            }
            for (filename, line, name), entry in hottest
        ],
    }


def _short(filename: str) -> str:
    return _PREFIX.sub("", filename)
