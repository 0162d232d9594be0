"""One asyncio lock per key, kept only while somebody holds it or waits for it.

A ``dict.setdefault(key, Lock())`` table grows by one entry for every key ever
locked (a refused open, a failed subscribe); this one forgets a key as soon as
its last user leaves, so it holds at most as many entries as there are callers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class KeyedLocks(Generic[K]):
    """Mutual exclusion per key, for many concurrent tasks on one event loop."""

    def __init__(self) -> None:
        self._entries: dict[K, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    @asynccontextmanager
    async def hold(self, key: K) -> AsyncIterator[None]:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1  # counted before waiting: a waiter keeps the entry alive
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if not entry.users and self._entries.get(key) is entry:
                del self._entries[key]
