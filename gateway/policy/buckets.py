"""Token buckets: a rate and a burst, and a bounded table of buckets in this process.

A bucket holds at most ``burst`` tokens and gains ``per_second`` of them each
second; a call takes one.  A caller that waited long enough has a full bucket,
so a table that forgets its least recently used bucket (to stay bounded) forgets
nothing of a caller who was idle that long, and at worst hands a flooding caller
a fresh burst.  The same arithmetic runs in Redis for a cluster (see
:mod:`gateway.cluster.redis_store`).
"""

from __future__ import annotations

import math
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

# Buckets one route's table holds at once (per principal, and per principal and
# tool); past it the least recently used is forgotten.
MAX_BUCKETS = 10_000
_PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*([smh]))?\s*$")


@dataclass(frozen=True)
class Rate:
    """``count`` calls per ``period`` seconds, at most ``burst`` at once."""

    count: float
    period: float
    burst: int
    # Worked out once: every call's take reads it.
    per_second: float = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_second", self.count / self.period)

    @classmethod
    def parse(cls, text: str, burst: int | None = None) -> Rate:
        """``N/s``, ``N/m`` or ``N/h`` (``N`` alone: per second); ``burst`` defaults
        to ``N``, at least 1.  ValueError naming the problem."""
        match = _RATE.match(text)
        if match is None:
            raise ValueError("expected N/s, N/m or N/h (calls per second, minute or hour)")
        count = float(match.group(1))
        if count <= 0:
            raise ValueError("the rate must be above 0")
        if burst is not None and burst < 1:
            raise ValueError("the burst must be at least 1")
        return cls(count, _PERIODS[match.group(2) or "s"], burst or max(1, math.ceil(count)))

    def __str__(self) -> str:
        unit = next(u for u, seconds in _PERIODS.items() if seconds == self.period)
        return f"{self.count:g}/{unit} (burst {self.burst})"


# One bucket to take from: its key and its rate.
Limit = tuple[str, Rate]
# What taking said: 0.0 and -1 when every bucket gave a token; else the seconds until
# all could, and the index of the bucket that waits longest (nothing was taken).
Taken = tuple[float, int]


def refill(tokens: float, elapsed: float, rate: Rate) -> float:
    """A bucket's tokens ``elapsed`` seconds after it held ``tokens``."""
    return min(float(rate.burst), tokens + max(0.0, elapsed) * rate.per_second)


def take_one_each(
    held: Sequence[tuple[float, float] | None], limits: Sequence[Limit], now: float
) -> tuple[Taken, list[float]]:
    """Taking one token from every bucket of ``limits``, or none: ``held`` is each
    bucket's tokens and when they were counted (None: a full bucket).  What taking
    said, and each bucket's tokens now."""
    levels = []
    wait, which = 0.0, -1
    for index, (state, (_, rate)) in enumerate(zip(held, limits, strict=True)):
        # refill(), inline: this runs on every limited call.
        level = float(rate.burst)
        if state is not None:
            level = min(level, state[0] + max(0.0, now - state[1]) * rate.per_second)
        levels.append(level)
        if level < 1.0 and (1.0 - level) / rate.per_second > wait:
            wait, which = (1.0 - level) / rate.per_second, index
    if which < 0:
        levels = [level - 1.0 for level in levels]
    return (wait, which), levels


def full_after(rate: Rate) -> float:
    """Seconds an emptied bucket takes to be full again (then it may be forgotten)."""
    return rate.burst / rate.per_second


class LocalBuckets:
    """This process's buckets, at most ``max_buckets`` (least recently used forgotten)."""

    def __init__(
        self, max_buckets: int = MAX_BUCKETS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_buckets = max_buckets
        self._clock = clock
        # key -> (tokens, when they were counted)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, limits: Sequence[Limit]) -> Taken:
        """One token from every bucket of ``limits``, or none (all or nothing)."""
        now = self._clock()
        taken, levels = take_one_each([self._buckets.get(key) for key, _ in limits], limits, now)
        for (key, _), level in zip(limits, levels, strict=True):
            self._buckets[key] = (level, now)
            self._buckets.move_to_end(key)
        while len(self._buckets) > self.max_buckets:
            self._buckets.popitem(last=False)
        return taken
