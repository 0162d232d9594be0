"""OwnerLookups: the requests that ask about the same replica at once share one
store look-up (a stub store: a unit test of the one class)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.cluster.lookups import OwnerLookups
from gateway.cluster.store import MemoryStore, Replica


class GatedStore(MemoryStore):
    """Look-ups wait for ``gate``; counted; raising ``error`` when set."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()  # a look-up reached the store
        self.asked: list[str] = []
        self.error: Exception | None = None

    async def replica(self, replica_id: str) -> Replica | None:
        self.asked.append(replica_id)
        self.entered.set()
        await self.gate.wait()
        if self.error is not None:
            raise self.error
        return await super().replica(replica_id)


async def test_concurrent_look_ups_of_one_replica_share_one_store_call() -> None:
    store = GatedStore()
    await store.register(Replica("a", "http://a"), 30)
    lookups = OwnerLookups(store)
    asking = [asyncio.ensure_future(lookups.replica(r)) for r in ["a", "b"] * 50]
    async with asyncio.timeout(5):  # the askers all ran before the store's look-up did
        await store.entered.wait()
    quitter = asking.pop(0)
    quitter.cancel()  # the asker that started it gives up: the others still get answers
    store.gate.set()
    found = await asyncio.gather(*asking)
    assert store.asked == ["a", "b"]
    assert found == [None] + [Replica("a", "http://a"), None] * 49
    # Once answered, the next asker asks the store again (nothing is cached).
    assert await lookups.replica("a") == Replica("a", "http://a")
    assert store.asked == ["a", "b", "a"]


async def test_a_failed_look_up_fails_every_asker_alike() -> None:
    store = GatedStore()
    store.error = ConnectionError("No connection available.")
    lookups = OwnerLookups(store)
    asking = [asyncio.ensure_future(lookups.replica("a")) for _ in range(10)]
    async with asyncio.timeout(5):
        await store.entered.wait()
    store.gate.set()
    for outcome in await asyncio.gather(*asking, return_exceptions=True):
        assert isinstance(outcome, ConnectionError)
    assert store.asked == ["a"]
    with pytest.raises(ConnectionError):  # and the next asks again
        await lookups.replica("a")
    assert store.asked == ["a", "a"]
