"""The subscription hub's listeners by scope, and what each scope wants in all.

Every session of a route is a listener of the hub, so a scope (one principal's
upstream session, or on a stateless upstream one principal) may hold thousands.
What a scope's upstream must be told (the union of the list changes and URIs its
listeners want) and whether anyone is left in it are read on every join, leave
and (un)subscribe: counted here as listeners change, they cost what is wanted to
read, not a walk over every listener (which made opening or ending N sessions
take N^2 steps).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


class Scopes:
    """Listener keys by scope; per scope, how many listeners want each list change and URI."""

    def __init__(self) -> None:
        self._keys: dict[str, dict[str, None]] = {}  # scope -> keys, in joining order
        self._lists: dict[str, Counter[str]] = {}
        self._uris: dict[str, Counter[str]] = {}

    def add(self, scope: str, key: str, lists: Iterable[str], uris: Iterable[str]) -> None:
        self._keys.setdefault(scope, {})[key] = None
        self._count(self._lists, scope, lists, +1)
        self._count(self._uris, scope, uris, +1)

    def remove(self, scope: str, key: str, lists: Iterable[str], uris: Iterable[str]) -> None:
        keys = self._keys.get(scope)
        if keys is None or key not in keys:
            return
        del keys[key]
        if not keys:
            del self._keys[scope]
        self._count(self._lists, scope, lists, -1)
        self._count(self._uris, scope, uris, -1)

    def lists(self, scope: str, before: Iterable[str], after: Iterable[str]) -> None:
        """One listener of ``scope`` now hears ``after`` instead of ``before``."""
        self._count(self._lists, scope, after, +1)
        self._count(self._lists, scope, before, -1)

    def uri(self, scope: str, uri: str, delta: int) -> None:
        """One listener of ``scope`` watches ``uri`` (+1) or no longer does (-1)."""
        self._count(self._uris, scope, (uri,), delta)

    def occupied(self, scope: str) -> bool:
        return scope in self._keys

    def keys(self, scope: str) -> list[str]:
        return list(self._keys.get(scope, ()))

    def wanted(self, scope: str) -> tuple[frozenset[str], list[str]]:
        """The list changes and (sorted) URIs at least one listener of ``scope`` wants."""
        return frozenset(self._lists.get(scope, ())), sorted(self._uris.get(scope, ()))

    def empty(self) -> bool:
        return not (self._keys or self._lists or self._uris)

    @staticmethod
    def _count(
        table: dict[str, Counter[str]], scope: str, names: Iterable[str], delta: int
    ) -> None:
        counts = table.get(scope)
        for name in names:
            if counts is None:
                counts = table[scope] = Counter()
            left = counts[name] + delta
            if left > 0:
                counts[name] = left
            else:
                counts.pop(name, None)
        if counts is not None and not counts:
            del table[scope]
