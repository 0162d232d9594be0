"""`python -m bench`: the gateway against a byte-forwarding reference proxy, on loopback.

Starts two upstreams (the demo server, 2025-11-25; a modern 2026-07-28 echo
server), a reference proxy and a gateway in front of each, all as real
processes on free 127.0.0.1 ports; runs rotating rounds of ``tools/call echo``
at 1, 16 and 64 callers; prints the ratios to the reference proxy (or JSON
with ``--json``).  ``--profile`` instead profiles the gateway on a cross-era
call.  Every process it started is stopped on exit, error or interrupt included.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from types import FrameType
from typing import Any

from bench import lanes
from bench.parking import render_parking
from bench.profile import profile, render_profile
from bench.run import Config, OutsideSignal, run


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through run()'s cleanup


def _num(value: Any, fmt: str, width: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-".rjust(width)
    return format(value, fmt).rjust(width)


HEADER = (
    f"{'path':<47} {'calls':>6} {'err':>3} {'req/s':>6} {'xref':>5} {'p50ms':>6} {'+p50':>5} "
    f"{'xref':>5} {'p99ms':>6} {'+p99':>6} {'xref':>5} {'midCPU':>6} {'upCPU':>5} {'conns':>5} "
    f"{'upreq':>5}"
)


def _row(row: dict[str, Any]) -> str:
    return " ".join(
        [
            f"{row['label']:<47}",
            _num(row["calls"], "d", 6),
            _num(row["errors"], "d", 3),
            _num(row["throughput_rps"], ".0f", 6),
            _num(row.get("throughput_x_ref"), ".2f", 5),
            _num(row["p50_ms"], ".2f", 6),
            _num(row.get("p50_added_ms"), ".2f", 5),
            _num(row.get("p50_added_x_ref"), ".1f", 5),
            _num(row["p99_ms"], ".2f", 6),
            _num(row.get("p99_added_ms"), ".2f", 6),
            _num(row.get("p99_added_x_ref"), ".1f", 5),
            _num(row["mid_cpu_us_per_call"] or None, ".0f", 6),
            _num(row["upstream_cpu_us_per_call"], ".0f", 5),
            _num(row["upstream_connections_per_round_max"], "d", 5),
            _num(row["upstream_requests_per_call"], ".2f", 5),
        ]
    ) + (f"  ! {row['first_error'][:80]}" if row.get("first_error") else "")


def render(report: dict[str, Any]) -> str:
    m, c = report["machine"], report["config"]
    lines = [
        f"MCP gateway vs byte-forwarding proxy: {m['cpus']} CPUs ({m['cpu_model']}), "
        f"Python {m['python']}, aiohttp {m['aiohttp']}, gateway --log-level "
        f"{c['gateway_log_level']}",
        f"{c['rounds']} rotating rounds; per path and round {c['calls_sequential']} calls at 1 "
        f"caller, {c['calls_concurrent']} at more; load average before "
        f"{report['load_average_before']}, after {report['load_average_after']}; CPU used by "
        f"other processes during the rounds {report['cpu_s_used_by_others']} s (ours "
        f"{report['cpu_s_used_by_benchmark']} s, {report['wall_s']} s wall)",
        "xref: throughput / the reference proxy's; +p50/+p99: ms added to the direct call; "
        "their xref: added / added by the reference proxy",
        "midCPU/upCPU: us of CPU per call in the proxy or gateway / in the upstream; conns: "
        "TCP connections the upstream accepted, most in one round (--json also has the sum); "
        "upreq: upstream HTTP requests per call",
    ]
    for callers in c["callers"]:
        lines += ["", f"{callers} caller{'s' if callers > 1 else ''}", HEADER]
        lines += [_row(row) for row in report["rows"] if row["callers"] == callers]
    lines += ["", "RSS (MiB, after warm-up -> after the rounds)"]
    for name, (start, end) in report["rss_kib"].items():
        lines.append(f"  {name:<24} {start / 1024:6.1f} -> {end / 1024:6.1f}")
    if "parking" in report:
        lines += ["", *render_parking(report["parking"])]
    if "tracing" in report:
        lines += ["", *render_tracing(report["tracing"])]
    return "\n".join(lines)


def render_tracing(tracing: dict[str, Any]) -> list[str]:
    """--otel: what traces cost per call, and what the sink received."""
    sink = tracing["sink"]
    lines = [
        "OpenTelemetry traces on (--otel: OTLP/HTTP to a local sink, the SDK's default batching,"
        f" sampler {tracing['sampler']}) against off, same rounds",
        f"{'path':<40} {'callers':>7} {'CPU off':>7} {'CPU on':>7} {'+us':>6} {'+%':>6} "
        f"{'p50 off':>7} {'p50 on':>7}",
    ]
    for row in tracing["rows"]:
        lines.append(
            f"{row['label']:<40} {row['callers']:>7} {row['cpu_us_off']:>7.0f} "
            f"{row['cpu_us_on']:>7.0f} {row['cpu_us_added']:>+6.0f} {row['cpu_added_pct']:>+5.0f}% "
            f"{row['p50_ms_off']:>7.2f} {row['p50_ms_on']:>7.2f}"
        )
    lines.append(
        f"sink: {sink['spans']} spans in {sink['exports']} exports ({sink['bytes'] / 1024:.0f} KiB)"
        f" for {tracing['traced_calls']} traced calls: {tracing['spans_per_call']} spans per call"
    )
    return lines


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="Benchmark the MCP revision gateway on loopback."
    )
    parser.add_argument("--quick", action="store_true", help="2 rounds, small counts")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--rounds", type=int, help="rotating rounds (default 4, quick 2)")
    parser.add_argument(
        "--uvloop", action="store_true", help="also run each gateway path with uvloop installed"
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help="also every gateway path with OpenTelemetry traces on (to a local OTLP sink)",
    )
    parser.add_argument(
        "--park",
        type=int,
        default=0,
        metavar="N",
        help="then park N abandoned greet_me calls in the gateway and measure them",
    )
    parser.add_argument(
        "--gateway-log-level",
        default="warning",
        choices=("debug", "info", "warning", "error"),
        help="the gateway's --log-level (default warning, as the issue's anchors)",
    )
    parser.add_argument(
        "--no-lanes",
        action="store_true",
        help="skip the lanes against the byte proxy on uvloop (bench.lanes) after the table",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="instead: profile the gateway (cProfile) on cross-era calls, asyncio and uvloop",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    if args.profile:
        calls = 1500 if args.quick else 6000
        report = profile(calls, 16, args.gateway_log_level)
        print(json.dumps(report, indent=2) if args.json else render_profile(report))
        return 0
    overrides: dict[str, Any] = {
        "gateway_log_level": args.gateway_log_level,
        "uvloop": args.uvloop,
        "otel": args.otel,
        "park": args.park,
    }
    if args.rounds:
        overrides["rounds"] = args.rounds
    config = Config.quick(**overrides) if args.quick else Config(**overrides)
    if not args.json:
        print("starting upstreams, reference proxies and gateways ...", file=sys.stderr, flush=True)
    try:
        report = run(config)
    except OutsideSignal as exc:
        print(f"benchmark void: {exc}", file=sys.stderr)
        return 3
    if not args.no_lanes:  # issue 50's measure: a stdlib load, 16 connections, uvloop
        rounds, seconds = (2, 2.0) if args.quick else (args.rounds or 4, 4.0)
        report["lanes"] = lanes.measure(rounds, seconds)
    print(json.dumps(report, indent=2) if args.json else render(report))
    if not args.json and "lanes" in report:
        print("\nThe lanes against a byte-forwarding proxy on uvloop (python -m bench.lanes):")
        print(lanes.render(report["lanes"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
