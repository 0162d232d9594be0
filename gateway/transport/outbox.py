"""A session's outbox: messages waiting for its standalone stream, in order, bounded.

What asyncio.Queue does for it (``put_nowait`` refusing with ``QueueFull`` past
the bound, ``get`` waiting, ``get_nowait``, ``qsize``) at a fraction of its
size: a Queue is four deques (~3 KiB) from the moment it exists, and every
session with a stream open holds one while idle.  This one holds a deque only
while messages wait, and a future only while a reader waits.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class Outbox(Generic[T]):
    """A bounded FIFO with waiting readers (first come, first served)."""

    __slots__ = ("_items", "_maxsize", "_readers")

    def __init__(self, maxsize: int) -> None:
        self._maxsize = maxsize
        self._items: deque[T] | None = None
        self._readers: list[asyncio.Future[None]] | None = None

    def qsize(self) -> int:
        return len(self._items) if self._items is not None else 0

    def put_nowait(self, item: T) -> None:
        """Queue ``item``; ``asyncio.QueueFull`` when the bound is reached."""
        if self.qsize() >= self._maxsize:
            raise asyncio.QueueFull
        if self._items is None:
            self._items = deque()
        self._items.append(item)
        self._wake()

    def get_nowait(self) -> T:
        """The oldest item; ``asyncio.QueueEmpty`` when there is none."""
        if not self._items:
            raise asyncio.QueueEmpty
        item = self._items.popleft()
        if not self._items:
            self._items = None
        return item

    async def get(self) -> T:
        """The oldest item, once there is one."""
        while not self._items:
            reader = asyncio.get_running_loop().create_future()
            if self._readers is None:
                self._readers = []
            self._readers.append(reader)
            try:
                await reader
            except BaseException:
                self._forget(reader)
                if not reader.cancelled() and self._items:
                    self._wake()  # it was woken, but leaves: the next reader takes it
                raise
            self._forget(reader)
        return self.get_nowait()

    def _wake(self) -> None:
        for reader in self._readers or ():
            if not reader.done():
                reader.set_result(None)
                return

    def _forget(self, reader: asyncio.Future[None]) -> None:
        if self._readers is not None:
            if reader in self._readers:
                self._readers.remove(reader)
            if not self._readers:
                self._readers = None
