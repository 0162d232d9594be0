"""Fair shares of one bounded table: who holds what, and who gives way when it is full.

Every table the gateway keeps for its callers (client sessions, parked calls) is
bounded in all and per owner (a principal).  A bound in all that refuses the
newcomer lets anyone who fills it first lock everyone else out; so here, when
the table is full, the newcomer is refused only if nobody holds more than it
does: otherwise the least recently used *idle* entry of the heaviest holder is
ended to make room.  So a flood of made-up principals (any token string is one, in
front of an upstream that checks nothing) costs the flood's own entries first,
and an innocent newcomer still gets in.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from gateway.core.failure import Failure, FailureKind

K = TypeVar("K", bound=Hashable)


class FairTable(Generic[K]):
    """Entries (keys) of owners, least recently used first.  ``idle(key)``: whether an
    entry may be ended to make room (nothing in progress on it); ``end(key)`` ends it
    (:meth:`remove` is called after it in any case)."""

    def __init__(
        self,
        what: str,
        total: int,
        per_owner: int,
        *,
        idle: Callable[[K], bool],
        end: Callable[[K], None],
    ) -> None:
        self.what = what
        self.total = total
        self.per_owner = per_owner
        self._idle = idle
        self._end = end
        self._owned: dict[str, OrderedDict[K, None]] = {}
        # Every entry, least recently used first, with its owner.
        self._lru: OrderedDict[K, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._lru)

    def held(self, owner: str) -> int:
        return len(self._owned.get(owner, ()))

    def make_room(self, owner: str) -> Failure | None:
        """Room for one more entry of ``owner``, ending others' idle entries if that is
        fair; the Failure (nothing ended) when it is not."""
        if self.held(owner) >= self.per_owner:
            return Failure(
                FailureKind.QUOTA_EXCEEDED,
                f"too many {self.what} for this caller (at most {self.per_owner})",
                {"quota": self.what, "limit": self.per_owner},
            )
        if len(self) >= self.total and not self._give_way(owner):
            return Failure(
                FailureKind.OVERLOADED,
                f"the gateway holds its maximum of {self.total} {self.what}, none of which"
                " can give way to this caller; try again later",
                {"quota": self.what, "limit": self.total},
            )
        return None

    def add(self, owner: str, key: K) -> None:
        """Count ``key`` as ``owner``'s (room made first, with :meth:`make_room`)."""
        # An ordered set: the value is never read.
        self._owned.setdefault(owner, OrderedDict())[key] = None  # pragma: no mutate
        self._lru[key] = owner

    def touch(self, key: K) -> None:
        """``key`` was used: it is its owner's most recently used."""
        owner = self._lru.get(key)
        if owner is not None:
            self._owned[owner].move_to_end(key)
            self._lru.move_to_end(key)

    def remove(self, key: K) -> None:
        owner = self._lru.pop(key, None)
        if owner is None:
            return
        owned = self._owned[owner]
        del owned[key]
        if not owned:
            del self._owned[owner]

    def keys_of(self, owner: str) -> list[K]:
        """The owner's entries, least recently used first."""
        return list(self._owned.get(owner, ()))

    def oldest(self, owner: str) -> K | None:
        """The owner's least recently used entry (None: it holds none)."""
        owned = self._owned.get(owner)
        return next(iter(owned)) if owned else None

    def _give_way(self, newcomer: str) -> bool:
        """End the least recently used idle entry of the heaviest holders that hold more
        than the newcomer (the next heaviest when all of theirs are busy); False when
        there is none, and then nobody gives way."""
        mine = self.held(newcomer)
        counts = {o: len(owned) for o, owned in self._owned.items()}
        for tier in sorted({n for n in counts.values() if n > mine}, reverse=True):
            victim = next(
                (k for k, o in self._lru.items() if counts.get(o) == tier and self._idle(k)),
                None,
            )
            if victim is not None:
                self._end(victim)
                self.remove(victim)  # in case ``end`` did not
                return True
        return False
