"""`python -m bench`: measure the gateway in front of its demo server and print the figures.

Starts the demo upstream and `gateway serve` as real processes on loopback
free ports, drives them with raw aiohttp clients (bounded loops), and prints a
table (or JSON with ``--json``).  Every process it started is stopped on exit,
error or interrupt included.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from types import FrameType
from typing import Any

from bench.run import Config, OutsideSignal, run


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through run()'s cleanup


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:8.2f}"


def _us(run_: dict[str, Any], who: str) -> str:
    value = run_["cpu_us_per_call"].get(who)
    return "-" if value is None else f"{value:7.0f}"


def render(report: dict[str, Any]) -> str:
    machine, config = report["machine"], report["config"]
    lines = [
        f"MCP revision gateway benchmark: {machine['cpus']} CPUs ({machine['cpu_model']}), "
        f"Python {machine['python']}, aiohttp {machine['aiohttp']}",
        f"upstream: bundled demo server (2025-11-25); gateway log level: "
        f"{config['gateway_log_level']}; all on 127.0.0.1, client in the benchmark process",
        "",
        "tools/call echo",
        f"{'client / path':<40} {'conc':>4} {'calls':>6} {'err':>4} {'p50 ms':>8} "
        f"{'p90 ms':>8} {'p99 ms':>8} {'req/s':>8}  {'CPU us/call: gw':>14} {'up':>7} "
        f"{'client':>7}",
    ]
    base: dict[str, float] = {}
    for mode in ("sequential", "concurrent"):
        for scenario in report["scenarios"]:
            r = scenario[mode]
            gw = _us(r, "gateway") if scenario["via_gateway"] else "-"
            capped = " (capped)" if r["capped"] else ""
            lines.append(
                f"{scenario['label']:<40} {r['concurrency']:>4} {r['requests']:>6} "
                f"{r['errors']:>4} {_ms(r['p50_ms'])} {_ms(r['p90_ms'])} {_ms(r['p99_ms'])} "
                f"{r['throughput_rps']:>8.0f}  {gw:>14} {_us(r, 'upstream'):>7} "
                f"{_us(r, 'client'):>7}{capped}"
            )
            if not scenario["via_gateway"]:
                base[mode] = r["p50_ms"]
        lines.append("")
    lines.append("added by the gateway (p50, against the direct 2025-11-25 call):")
    for mode in ("sequential", "concurrent"):
        parts = [
            f"{s['client']} +{s[mode]['p50_ms'] - base[mode]:.2f} ms"
            for s in report["scenarios"]
            if s["via_gateway"] and mode in base
        ]
        lines.append(f"  {mode:<10}  " + ", ".join(parts))
    gw, park = report["gateway"], report["parking"]
    lines += [
        "",
        "gateway process",
        f"  RSS at start              {gw['rss_kib_start'] / 1024:8.1f} MiB",
        f"  RSS after the load        {gw['rss_kib_after_load'] / 1024:8.1f} MiB",
        f"  RSS after parking         {gw['rss_kib_after_parking'] / 1024:8.1f} MiB",
        f"  CPU during the load       {gw['cpu_s_during_load']:8.2f} s "
        f"(of {gw['load_wall_s']:.1f} s wall, direct runs included)",
        "",
        f"parking: {park['attempted']} abandoned greet_me calls (2026-07-28 client, "
        f"concurrency {config['park_concurrency']}, {config['park_timeout_s']} s timeout each)",
        f"  answered input_required   {park['answered_input_required']:8d}",
        f"  failed                    {park['failed']:8d}"
        + (f"  first: {park['first_error']}" if park["first_error"] else ""),
        f"  parked (gateway gauge)    {_gauge(park['parked_gauge']):>8}",
        f"  RSS growth                {park['gateway_rss_growth_kib']:8d} KiB"
        + (
            f"  = {park['kib_per_parked_call']:.1f} KiB per parked call"
            if park["kib_per_parked_call"] is not None
            else ""
        ),
        f"  upstream RSS growth       {park['upstream_rss_growth_kib']:8d} KiB",
        "  echo on the route after   "
        + (
            "ok"
            if park["echo_after_parking_ok"]
            else f"FAILED ({park.get('echo_after_parking_error', '')})"
        ),
    ]
    if "profile" in report:
        lines += ["", *_render_profile(report["profile"])]
    return "\n".join(lines)


def _render_profile(profile: dict[str, Any]) -> list[str]:
    if "error" in profile:
        return [f"profile: {profile['error']}"]
    lines = [
        f"gateway profile (cProfile: {profile['total_s']:.1f} s busy, "
        f"{profile['idle_s']:.1f} s idle in epoll; "
        "latencies above are inflated by it)",
        "  by library: "
        + ", ".join(f"{name} {pct:.0f}%" for name, pct in profile["by_library_pct"].items()),
        f"  {'tottime s':>9} {'cumtime s':>9} {'calls':>8}  function",
    ]
    for entry in profile["hottest"]:
        lines.append(
            f"  {entry['tottime_s']:9.3f} {entry['cumtime_s']:9.3f} {entry['calls']:8d}  "
            f"{entry['function']}"
        )
    return lines


def _gauge(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="Benchmark the MCP revision gateway on loopback."
    )
    parser.add_argument("--quick", action="store_true", help="small counts (under 20 s)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--gateway-log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="the gateway's --log-level (info, its default, logs one line per call)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run the gateway under cProfile and print where it spends its time "
        "(its latencies are then inflated by the profiler)",
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    config = (
        Config.quick(args.gateway_log_level)
        if args.quick
        else Config(gateway_log_level=args.gateway_log_level)
    )
    if not args.json:
        print("starting the demo upstream and the gateway ...", file=sys.stderr, flush=True)
    try:
        report = run(config, profile=args.profile)
    except OutsideSignal as exc:
        print(f"benchmark void: {exc}", file=sys.stderr)
        return 3
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
