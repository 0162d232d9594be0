"""Bounds: on what a message may be, on the descriptors the process may use, and on
what each principal holds of a bounded table.

A message nesting too deep is refused before any recursive code sees it; new work is
refused while the process is short of descriptors.  Of a table, a :class:`Quota`
refuses whatever exceeds the caller's share or the total (never made room for by
evicting someone else's entry: one caller's flood costs only that caller), while a
:class:`FairTable` makes room when it is full, fairly.

The tables a caller fills at will (client sessions, parked calls) are fair tables,
bounded in all and per owner (a principal).  A bound in all that refuses the
newcomer lets anyone who fills it first lock everyone else out; so here, when
the table is full, the newcomer is refused only if nobody holds more than it
does: otherwise the least recently used *idle* entry of the heaviest holder is
ended to make room.  So a flood of made-up principals (any token string is one, in
front of an upstream that checks nothing) costs the flood's own entries first,
and an innocent newcomer still gets in.
"""

from __future__ import annotations

import errno
import os
import resource
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from gateway.core.failure import Failure, FailureKind

K = TypeVar("K", bound=Hashable)

# JSON nesting deeper than this is refused: real MCP messages stay far below it, and
# every recursive walk of a message (projection, validation, encoding) stays safe.
MAX_DEPTH = 64


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests objects/arrays more than ``limit`` levels deep.

    Iterative, so a hostile message cannot exhaust the stack while being measured.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            # Only the root can be a scalar (children are pushed only if containers),
            # so `break` would end the same empty stack: an equivalent mutant.
            continue  # pragma: no mutate
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class DescriptorBudget:
    """Whether the process has descriptors to spare for new work.

    Refusing new requests while ``reserve`` descriptors are still free keeps the
    process able to answer (with 503), to log and to shut down, instead of
    failing in ``accept()`` and wherever a socket or pipe is opened.  The count
    (``/proc/self/fd``) is sampled at most every ``interval`` seconds.
    """

    # The interval is a tuning value (how stale the count may be), not a behaviour.
    def __init__(self, reserve: int, interval: float = 0.25) -> None:  # pragma: no mutate
        self.reserve = reserve
        self.interval = interval
        self._open = 0
        self._limit = self.limit()
        self._at = float("-inf")

    @staticmethod
    def limit() -> int:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return soft if soft != resource.RLIM_INFINITY else 1 << 20

    def open_count(self) -> int:
        now = time.monotonic()
        if now - self._at >= self.interval:
            self._limit = self.limit()  # sampled with the count: a syscall each
            try:
                self._open = len(os.listdir("/proc/self/fd"))
            except OSError as exc:
                # Out of descriptors already (listing takes one), or no /proc at all.
                self._open = self.limit() if exc.errno in (errno.EMFILE, errno.ENFILE) else 0
            self._at = now
        return self._open

    def exhausted(self) -> bool:
        return self.reserve > 0 and self.open_count() >= self._limit - self.reserve


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

    def keep(self, owner: str, key: K) -> None:
        """Count ``key`` as ``owner``'s, for what is only remembered (nothing refused):
        past the owner's quota, or with no room another can fairly give, the owner's
        own least recently used entry goes (ended) to make room."""
        if key in self._lru:
            self.touch(key)
            return
        while self.held(owner) >= self.per_owner or (
            len(self) >= self.total and not self._give_way(owner)
        ):
            oldest = self.oldest(owner)
            if oldest is None:
                return  # nothing of its own to give up: not kept
            self._end(oldest)
            self.remove(oldest)
        self.add(owner, key)

    def owner_of(self, key: K) -> str | None:
        return self._lru.get(key)

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
