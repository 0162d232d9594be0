"""`python -m bench.store_burst`: the Redis cluster store under a burst of operations.

A burst of B ``use_once`` calls at once (what B parked calls resumed together cost
their owner replica), through :class:`gateway.cluster.redis_store.RedisStore` with
its waiting pool of P connections, against a redis-server started here.  Beside
it, two references on the same Redis: redis-py's default pool (what the store used
before: it refuses past its 100 connections) and one pipeline per burst (one round
trip for all: what batching the store's operations, as the rate limiter batches its
takes, would cost at best).  Every path and burst runs ``--rounds`` times, rotating.

Per row: bursts' wall time as operations per second (median of rounds), this
process's CPU per operation (what a replica pays, its event loop included), the
slowest operation of a burst (median of rounds), and operations refused.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis

from bench.procs import HOST, Lab, _wait_port, free_port
from bench.run import machine
from gateway.cluster.redis_store import RedisStore

Burst = Callable[[list[str]], Awaitable[tuple[list[float], int]]]


def _timed_each(one: Callable[[str], Awaitable[Any]]) -> Burst:
    """A burst of ``one`` per key, all at once: each one's latency, and the refused."""

    async def run(keys: list[str]) -> tuple[list[float], int]:
        start = time.perf_counter()

        async def timed(key: str) -> float | None:
            try:
                await one(key)
            except Exception:
                return None
            return time.perf_counter() - start

        done = await asyncio.gather(*(timed(key) for key in keys))
        return [t for t in done if t is not None], sum(1 for t in done if t is None)

    return run


def _pipelined(client: Any) -> Burst:
    async def run(keys: list[str]) -> tuple[list[float], int]:
        start = time.perf_counter()
        async with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.set(f"gw:used:{key}", b"1", nx=True, px=60_000)
            await pipe.execute()
        return [time.perf_counter() - start] * len(keys), 0

    return run


async def measure(
    url: str, bursts: list[int], pools: list[int], rounds: int
) -> list[dict[str, Any]]:
    stores = {p: RedisStore(url, pool_size=p, pool_timeout=10.0) for p in pools}
    default = aioredis.Redis.from_url(url)  # redis-py's ConnectionPool (100, refuses past it)
    paths: dict[str, Burst] = {
        f"store, waiting pool of {p}": _timed_each(lambda k, s=store: s.use_once(k, 60))
        for p, store in stores.items()
    }
    paths["redis-py default pool (before)"] = _timed_each(
        lambda k: default.set(f"gw:used:{k}", b"1", nx=True, px=60_000)
    )
    paths["one pipeline per burst (batching, at best)"] = _pipelined(default)
    samples: dict[tuple[str, int], list[tuple[float, float, float, int]]] = {}
    serial = 0
    try:
        for run in paths.values():  # warm-up: connections made
            await run([f"warm-{serial}-{i}" for i in range(max(bursts))])
            serial += 1
        for r in range(rounds):
            names = list(paths)
            for name in names[r % len(names) :] + names[: r % len(names)]:
                for size in bursts:
                    keys = [f"{serial}-{i}" for i in range(size)]
                    serial += 1
                    cpu, wall = time.process_time(), time.perf_counter()
                    latencies, refused = await paths[name](keys)
                    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                    slowest = max(latencies, default=0.0)
                    samples.setdefault((name, size), []).append((wall, cpu, slowest, refused))
    finally:
        for store in stores.values():
            await store.close()
        await default.aclose()
    return [
        {
            "path": name,
            "burst": size,
            "ops_per_s": round(size / statistics.median(s[0] for s in got)),
            "cpu_us_per_op": round(1e6 * statistics.median(s[1] for s in got) / size, 1),
            "slowest_ms": round(1e3 * statistics.median(s[2] for s in got), 2),
            "refused": max(s[3] for s in got),
        }
        for (name, size), got in samples.items()
    ]


def render(report: dict[str, Any]) -> str:
    lines = [
        f"{'path':44} {'burst':>5} {'ops/s':>7} {'CPU us/op':>9} {'slowest ms':>10} {'refused':>7}"
    ]
    for row in report["rows"]:
        lines.append(
            f"{row['path']:44} {row['burst']:>5} {row['ops_per_s']:>7} "
            f"{row['cpu_us_per_op']:>9} {row['slowest_ms']:>10} {row['refused']:>7}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.store_burst", description=__doc__)
    parser.add_argument("--bursts", default="300,1000", help="burst sizes, comma-separated")
    parser.add_argument("--pools", default="100,16", help="pool sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="one round of small bursts")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    bursts = [int(b) for b in args.bursts.split(",")]
    pools = [int(p) for p in args.pools.split(",")]
    rounds = args.rounds
    if args.tiny:
        bursts, pools, rounds = [20], [4], 1
    server = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/sbin:/usr/bin")
    if server is None:
        raise SystemExit("redis-server is not installed (scripts/test installs it)")
    lab = Lab()
    try:
        port = free_port()
        argv_redis = [server, "--port", str(port), "--bind", HOST, "--save", ""]
        redis = lab._spawn("redis", [*argv_redis, "--appendonly", "no", "--dir", str(lab.workdir)])
        _wait_port(port, 10.0, redis)
        rows = asyncio.run(measure(f"redis://{HOST}:{port}/0", bursts, pools, rounds))
    finally:
        lab.close()
    report = {
        "machine": machine(),
        "config": {"bursts": bursts, "pools": pools, "rounds": rounds},
        "rows": rows,
    }
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
