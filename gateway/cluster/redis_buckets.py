"""Rate limits' token buckets in Redis, every replica taking from the same ones.

The arithmetic is :mod:`gateway.policy.buckets`' own, run by a Lua script on
Redis's clock (so replicas whose clocks differ agree), each call's buckets taken
all or nothing.  The takes a replica has waiting are sent together: one script
run answers all of them, in the order they came, while the run before them is
under way.  One round trip then serves every call that arrived meanwhile, so a
busy replica spends one Redis command on many calls (redis-py's cost per command
is what a call would otherwise pay), and never holds more than one connection of
the pool for its limits however many calls wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from gateway.policy import Limit, Taken

# Calls' takes one script run answers at most (the rest go in the next run).
MAX_BATCH = 256

# KEYS: every bucket of every take in the batch, in order.  ARGV[1]: how many
# takes; then for each take its number of buckets n, and for each bucket its tokens
# per second and burst.  For each take in turn: one token from each of its buckets,
# or none.  Returns, for each take, the seconds to wait (a string: Redis would
# truncate a number) and the 0-based index of the bucket that waits longest (-1:
# the tokens were taken).  A bucket (a hash: tokens, when they were counted) expires
# once it would be full again, so Redis holds only the buckets of recent callers.
TAKE_TOKENS = """
local now = redis.call('TIME')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local out, k, a = {}, 1, 2
for _ = 1, tonumber(ARGV[1]) do
  local n = tonumber(ARGV[a])
  a = a + 1
  local levels, wait, which = {}, 0, 0
  for i = 1, n do
    local rate, burst = tonumber(ARGV[a + 2 * i - 2]) / 1000, tonumber(ARGV[a + 2 * i - 1])
    local held = redis.call('HMGET', KEYS[k + i - 1], 'v', 't')
    local tokens, last = tonumber(held[1]), tonumber(held[2])
    if tokens == nil or last == nil then tokens, last = burst, now end
    local level = math.min(burst, tokens + math.max(0, now - last) * rate)
    levels[i] = level
    if level < 1 and (1 - level) / rate > wait then wait, which = (1 - level) / rate, i end
  end
  local spent = 0
  if which == 0 then spent = 1 end
  for i = 1, n do
    local rate, burst = tonumber(ARGV[a + 2 * i - 2]) / 1000, tonumber(ARGV[a + 2 * i - 1])
    redis.call('HSET', KEYS[k + i - 1], 'v', tostring(levels[i] - spent), 't', tostring(now))
    redis.call('PEXPIRE', KEYS[k + i - 1], math.ceil(burst / rate) + 1000)
  end
  out[#out + 1] = tostring(wait / 1000)
  out[#out + 1] = which - 1
  k = k + n
  a = a + 2 * n
end
return out
"""

_Waiting = tuple[Sequence[Limit], "asyncio.Future[Taken]"]


class RedisBuckets:
    """Takes sent to Redis in batches (``prefix``: of every bucket's key)."""

    def __init__(self, redis: Any, prefix: str, *, slotted: bool = False) -> None:
        self._script = redis.register_script(TAKE_TOKENS)
        self._prefix = prefix
        # A Redis Cluster: each route's buckets share a hash slot, and one script run
        # takes only one route's (a script's keys must all be in one slot).
        self._slotted = slotted
        self._waiting: list[_Waiting] = []
        self._sending: asyncio.Task[None] | None = None

    async def take(self, limits: Sequence[Limit]) -> Taken:
        """One token from every bucket of ``limits``, or none (raises what Redis raised)."""
        future: asyncio.Future[Taken] = asyncio.get_running_loop().create_future()
        self._waiting.append((limits, future))
        if self._sending is None:
            self._sending = asyncio.ensure_future(self._send())
        return await future

    async def _send(self) -> None:
        """Batches, one at a time, until nobody waits (a caller that gave up is skipped)."""
        try:
            while self._waiting:
                batch = self._waiting[:MAX_BATCH]
                del self._waiting[:MAX_BATCH]
                try:
                    answers = await self._run([limits for limits, _ in batch])
                except Exception as exc:  # every take of the batch fails alike
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, future), answer in zip(batch, answers, strict=True):
                    if not future.done():
                        future.set_result(answer)
        finally:
            self._sending = None
            for _, future in self._waiting:  # cancelled (shutting down): nobody hangs
                if not future.done():
                    future.set_exception(ConnectionError("the rate limit store was closed"))
            self._waiting.clear()

    async def _run(self, takes: list[Sequence[Limit]]) -> list[Taken]:
        if not self._slotted:
            return await self._run_one(takes)
        groups: dict[str, list[int]] = {}
        for i, limits in enumerate(takes):
            groups.setdefault(_route(limits), []).append(i)
        answers: list[Taken] = [(0.0, 0)] * len(takes)
        ran = await asyncio.gather(
            *(self._run_one([takes[i] for i in indexes]) for indexes in groups.values())
        )
        for indexes, taken in zip(groups.values(), ran, strict=True):
            for i, answer in zip(indexes, taken, strict=True):
                answers[i] = answer
        return answers

    def _key(self, key: str) -> str:
        if not self._slotted:
            return self._prefix + key
        route, _, rest = key.partition(":")  # the route's digest, then the bucket
        return f"{self._prefix}{{{route}}}:{rest}"

    async def _run_one(self, takes: list[Sequence[Limit]]) -> list[Taken]:
        keys: list[str] = []
        args: list[float | int] = [len(takes)]
        for limits in takes:
            args.append(len(limits))
            for key, rate in limits:
                keys.append(self._key(key))
                args += [rate.per_second, rate.burst]
        flat = await self._script(keys=keys, args=args)
        return [(float(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2)]


def _route(limits: Sequence[Limit]) -> str:
    """The route a take's buckets belong to (every key starts with its digest)."""
    return limits[0][0].partition(":")[0] if limits else ""
