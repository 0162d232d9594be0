"""Quotas: how much of something one principal may hold, under a global bound.

Exceeding either is refused (never made room for by evicting someone else's
entry): one caller's flood costs only that caller.
"""

from __future__ import annotations

from collections import Counter

from gateway.core.failure import Failure, FailureKind


class Quota:
    """Counts what each principal holds of one thing (``what``: for the error)."""

    def __init__(self, what: str, per_principal: int, total: int) -> None:
        self.what = what
        self.per_principal = per_principal
        self.total = total
        self._held: Counter[str] = Counter()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def held(self, principal: str) -> int:
        return self._held[principal]

    def refusal(self, principal: str) -> Failure | None:
        """Why ``principal`` may not take one more (None: it may)."""
        if self._held[principal] >= self.per_principal:
            return Failure(
                FailureKind.QUOTA_EXCEEDED,
                f"too many {self.what} for this caller (at most {self.per_principal})",
                {"quota": self.what, "limit": self.per_principal},
            )
        if self._count >= self.total:
            return Failure(
                FailureKind.OVERLOADED,
                f"the gateway holds its maximum of {self.total} {self.what}; try again later",
                {"quota": self.what, "limit": self.total},
            )
        return None

    def acquire(self, principal: str) -> Failure | None:
        """Take one for ``principal``; the Failure (nothing taken) when over a bound."""
        refused = self.refusal(principal)
        if refused is None:
            self.add(principal)
        return refused

    def add(self, principal: str) -> None:
        """Count one more for ``principal`` whatever the bounds (checked before)."""
        self._held[principal] += 1
        self._count += 1

    def release(self, principal: str) -> None:
        if self._held[principal] <= 0:
            return
        self._held[principal] -= 1
        self._count -= 1
        if not self._held[principal]:
            del self._held[principal]
