"""Abandoned elicitations: how much a parked call costs the gateway, and whether the
route still answers with many of them parked."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from bench.load import run_load
from bench.procs import Mid, Upstream
from bench.wire import ModernClient


async def parked_gauge(http: aiohttp.ClientSession, gateway: Mid) -> float | None:
    """`gateway_parked_calls` from the gateway's /metrics."""
    url = gateway.url.removesuffix("/mcp") + "/metrics"
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


async def park(
    gateway: Mid, upstream: Upstream, *, calls: int, concurrency: int, timeout_s: float
) -> dict[str, Any]:
    """Abandoned `greet_me` calls of a 2026-07-28 client through the gateway in front
    of the demo server: each answered input_required (the upstream's elicitation
    parked in the gateway) and never retried."""
    rss_before = gateway.proc.rss_kib()
    upstream_before = upstream.proc.rss_kib()
    limit = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
    async with aiohttp.ClientSession(connector=limit) as http:
        client = ModernClient(http, gateway.url)
        result = await run_load(
            client.greet_and_abandon,
            total=calls,
            concurrency=concurrency,
            time_cap_s=60.0,
            call_timeout_s=timeout_s,
            stop_on_error=True,  # a stall shows at the first timeout; do not wait out the rest
            first_id=3_000_000,
        )
        await asyncio.sleep(0.5)  # let the gateway settle (expiry timers, buffers)
        parked = await parked_gauge(http, gateway)
        rss_after = gateway.proc.rss_kib()
        # Is the route still usable for an ordinary call, with those calls parked?
        echo_error = ""
        try:
            async with asyncio.timeout(min(3.0, timeout_s + 1)):
                await client.echo(4_000_000)
        except Exception as exc:  # a stalled route times out
            echo_error = f"{type(exc).__name__}: {exc}"[:200] or "failed"
    count = int(parked) if parked is not None else result.ok
    growth = rss_after - rss_before
    return {
        "attempted": result.requests,
        "answered_input_required": result.ok,
        "failed": result.errors,
        "first_error": result.first_error,
        "parked_gauge": parked,
        "gateway_rss_growth_kib": growth,
        "kib_per_parked_call": round(growth / count, 2) if count else None,
        "upstream_rss_growth_kib": upstream.proc.rss_kib() - upstream_before,
        "echo_after_parking": echo_error or "ok",
    }


def render_parking(park: dict[str, Any]) -> list[str]:
    per_call = park["kib_per_parked_call"]
    return [
        f"parking: {park['attempted']} abandoned greet_me calls (2026-07-28 client via the "
        f"gateway to the demo server): {park['answered_input_required']} input_required, "
        f"{park['failed']} failed{' (' + park['first_error'] + ')' if park['first_error'] else ''}",
        f"  parked (gauge) {park['parked_gauge']}, gateway RSS +{park['gateway_rss_growth_kib']} "
        f"KiB"
        + (f" = {per_call:.1f} KiB per parked call" if per_call is not None else "")
        + f", upstream RSS +{park['upstream_rss_growth_kib']} KiB, echo after: "
        f"{park['echo_after_parking']}",
    ]
