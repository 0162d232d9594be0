"""A route's policy: its exposure, then its rate limits, in front of every call.

The inbound side enters here only for a route that has a policy (``Route.policy``
is None otherwise, and the call goes on as before).  A refused call never reaches
the upstream; each refusal is counted for the metrics by route and reason
(``hidden``, ``rate``, ``tool_rate``, ``store_down``).
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.core import Call, Outcome
from gateway.policy.exposure import Exposure, Run
from gateway.policy.limiter import RateLimiter

# Told of each refusal: (route, reason).
RefusalObserver = Callable[[str, str], None]


class RoutePolicy:
    """What a route exposes and how fast its callers may call (either may be None)."""

    def __init__(self, route: str, exposure: Exposure | None, limiter: RateLimiter | None) -> None:
        self.route = route
        self.exposure = exposure if exposure else None
        self.limiter = limiter
        self.refused: list[RefusalObserver] = []

    def __bool__(self) -> bool:
        return self.exposure is not None or self.limiter is not None

    async def run(
        self, call: Call, principal: str, proceed: Run, *, charged: bool = True
    ) -> Outcome:
        """``call`` as the policy lets it go (``proceed`` runs it, or a page of a list).
        ``charged``: False for a client's answer to a round of a call already charged
        (a call is counted once, when it starts)."""
        exposure = self.exposure
        if exposure is not None:
            hidden = exposure.refusal(call)
            if hidden is not None:
                self._count("hidden")
                return hidden
        if self.limiter is not None and charged:
            limited = await self.limiter.take(principal, call)
            if limited is not None:
                failure, reason = limited
                self._count(reason)
                return failure
        if exposure is not None and exposure.filters(call):
            return await exposure.list(call, proceed)
        return await proceed(call)

    def _count(self, reason: str) -> None:
        for observer in self.refused:
            observer(self.route, reason)
