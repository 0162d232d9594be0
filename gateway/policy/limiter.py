"""A route's rate limits: per principal, and per principal and tool, as token buckets.

Alone, a replica keeps its buckets in this process (:class:`LocalBuckets`).  In a
cluster they live in the shared store, so N replicas enforce one limit.  When the
store cannot be reached, the route's fallback decides, and the change is logged
once each way: ``open`` keeps answering from this replica's own buckets (each
replica then lets the whole limit through, N times it in all), ``closed`` refuses
every limited call (503, ``Retry-After``) until the store answers again.  The
store is tried again at most every ``RECHECK`` seconds meanwhile, and a slow store
counts as a down one after ``STORE_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

import structlog

from gateway.core import Call, Failure, FailureKind, Operation
from gateway.policy.buckets import Limit, LocalBuckets, Rate, Taken

log = structlog.get_logger(__name__)

Fallback = Literal["open", "closed"]
FALLBACKS: tuple[Fallback, ...] = ("open", "closed")
# How long one check may wait for the shared store, and how long it is left alone
# once it failed (seconds).
STORE_TIMEOUT = 0.5
RECHECK = 1.0
# The calls the buckets count: the ones that make the upstream work.  Lists, the
# handshake, pings and subscriptions are not limited.
LIMITED = frozenset(
    {
        Operation.TOOLS_CALL,
        Operation.PROMPTS_GET,
        Operation.RESOURCES_READ,
        Operation.COMPLETE,
    }
)


class SharedBuckets(Protocol):
    """Buckets shared by every replica (the cluster's store)."""

    async def take_tokens(self, limits: Sequence[Limit]) -> Taken:
        """One token from every bucket of ``limits`` at once, or none (see
        :meth:`LocalBuckets.take`).  Raises when the store cannot answer."""
        ...


class RateLimiter:
    """The buckets of one route (``rate``: per principal; ``tool_rate``: per principal
    and tool; either may be None)."""

    def __init__(
        self,
        route: str,
        rate: Rate | None,
        tool_rate: Rate | None,
        *,
        fallback: Fallback = "open",
        shared: SharedBuckets | None = None,
        local: LocalBuckets | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.route = route
        self.rate = rate
        self.tool_rate = tool_rate
        self.fallback = fallback
        self.shared = shared
        self.local = local if local is not None else LocalBuckets()
        self._clock = clock
        # Keys are digests of the route, the principal and the tool: bounded whatever
        # a caller names, and never a credential.
        self._prefix = hashlib.blake2b(route.encode(), digest_size=8).hexdigest()
        self._store_down = False
        self._retry_at = float("-inf")

    def limits(self, principal: str, call: Call) -> list[tuple[Limit, str]]:
        """The buckets ``call`` takes a token from, each with the reason a refusal by
        it gives (none for a call that is not limited)."""
        if call.operation not in LIMITED:
            return []
        limits: list[tuple[Limit, str]] = []
        if self.rate is not None:
            limits.append(((self._key(principal), self.rate), "rate"))
        if self.tool_rate is not None and call.operation is Operation.TOOLS_CALL:
            name = call.params.get("name")
            key = self._key(principal, name if isinstance(name, str) else "")
            limits.append(((key, self.tool_rate), "tool_rate"))
        return limits

    def _key(self, principal: str, tool: str | None = None) -> str:
        if tool is None:
            digest = hashlib.blake2b(principal.encode(), digest_size=16).hexdigest()
            return f"{self._prefix}:p:{digest}"
        named = principal.encode() + b"\0" + tool.encode("utf-8", "surrogatepass")
        return f"{self._prefix}:t:{hashlib.blake2b(named, digest_size=16).hexdigest()}"

    async def take(self, principal: str, call: Call) -> tuple[Failure, str] | None:
        """None when ``call`` may go; else its refusal and the reason (``rate``,
        ``tool_rate`` or ``store_down``)."""
        checks = self.limits(principal, call)
        if not checks:
            return None
        taken = await self._take([limit for limit, _ in checks])
        if taken is None:
            return _store_down(), "store_down"
        wait, which = taken
        if which < 0:
            return None
        (_, rate), reason = checks[which]
        what = "this caller's calls"
        if reason == "tool_rate":
            what += f" of tool {_named(call)}"
        return _limited(what, rate, wait), reason

    async def _take(self, limits: list[Limit]) -> Taken | None:
        """From the shared store while it answers; else by the fallback (None: closed)."""
        shared = self.shared
        if shared is None:
            return self.local.take(limits)
        if self._clock() >= self._retry_at:
            try:
                async with asyncio.timeout(STORE_TIMEOUT):
                    taken = await shared.take_tokens(limits)
            except Exception as exc:  # the store is down or slow: the fallback decides
                self._retry_at = self._clock() + RECHECK
                self._went_down(exc)
            else:
                if self._store_down:
                    self._store_down = False
                    log.info("rate limit store reachable again: limits shared", route=self.route)
                return taken
        return self.local.take(limits) if self.fallback == "open" else None

    def _went_down(self, exc: BaseException) -> None:
        if self._store_down:
            return
        self._store_down = True
        how = (
            "each replica limits on its own (fail open)"
            if self.fallback == "open"
            else "limited calls are refused (fail closed)"
        )
        log.warning(
            f"rate limit store unreachable: {how}",
            route=self.route,
            fallback=self.fallback,
            error=str(exc) or type(exc).__name__,
        )


def _named(call: Call) -> str:
    name = call.params.get("name")
    text = name if isinstance(name, str) else ""
    return repr(text if len(text) <= 200 else text[:200] + "...")


def _seconds(wait: float) -> int:
    """Whole seconds to wait, as ``Retry-After`` says them (at least 1)."""
    return max(1, math.ceil(wait))


def _limited(what: str, rate: Rate, wait: float) -> Failure:
    after = _seconds(wait)
    return Failure(
        FailureKind.RATE_LIMITED,
        f"rate limit exceeded: {what} are limited to {rate}; retry after {after} s",
        {"retryAfterSeconds": after},
        headers={"Retry-After": str(after)},
    )


def _store_down() -> Failure:
    after = _seconds(RECHECK)
    return Failure(
        FailureKind.OVERLOADED,
        "rate limits cannot be checked (their shared store is unreachable); try again later",
        {"retryAfterSeconds": after},
        headers={"Retry-After": str(after)},
    )
