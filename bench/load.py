"""Bounded load loops: a fixed number of calls, a fixed concurrency, a time cap."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LoadResult:
    requests: int = 0
    errors: int = 0
    elapsed_s: float = 0.0
    capped: bool = False
    first_error: str = ""
    latencies_s: list[float] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> int:
        return self.requests - self.errors

    @property
    def throughput(self) -> float:
        """Successful calls per second of wall time."""
        return self.ok / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        """Nearest-rank percentile of the successful calls' latencies, in milliseconds."""
        if not self.latencies_s:
            return float("nan")
        ordered = sorted(self.latencies_s)
        rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
        return ordered[rank - 1] * 1000

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "elapsed_s": round(self.elapsed_s, 3),
            "capped": self.capped,
            "p50_ms": round(self.percentile_ms(50), 3),
            "p90_ms": round(self.percentile_ms(90), 3),
            "p99_ms": round(self.percentile_ms(99), 3),
            "throughput_rps": round(self.throughput, 1),
            **({"first_error": self.first_error} if self.first_error else {}),
        }


async def run_load(
    call: Callable[[int], Awaitable[None]],
    *,
    total: int,
    concurrency: int,
    time_cap_s: float,
    call_timeout_s: float,
    stop_on_error: bool = False,
    first_id: int = 1,
) -> LoadResult:
    """``total`` calls by ``concurrency`` workers; none started after ``time_cap_s``.

    Every call is bounded by ``call_timeout_s``; a failed call counts as an error
    (and with ``stop_on_error`` no further call is started).
    """
    result = LoadResult()
    ids = itertools.count(first_id)
    last_id = first_id + total
    start = time.perf_counter()
    deadline = start + time_cap_s
    stop = False

    async def worker() -> None:
        nonlocal stop
        while not stop:
            i = next(ids)
            if i >= last_id:
                return
            t0 = time.perf_counter()
            if t0 > deadline:
                result.capped = True
                return
            result.requests += 1
            try:
                async with asyncio.timeout(call_timeout_s):
                    await call(i)
            except Exception as exc:  # any failure of one call is counted, not fatal
                result.errors += 1
                if not result.first_error:
                    result.first_error = f"{type(exc).__name__}: {exc}"[:300]
                if stop_on_error:
                    stop = True
                continue
            result.latencies_s.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.elapsed_s = time.perf_counter() - start
    return result
