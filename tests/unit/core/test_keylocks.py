"""KeyedLocks: exclusion per key, and no entry left once nobody uses a key."""

from __future__ import annotations

import asyncio

import pytest

from gateway.core.keylocks import KeyedLocks


async def test_one_holder_per_key_and_other_keys_run_meanwhile() -> None:
    locks: KeyedLocks[str] = KeyedLocks()
    inside: list[str] = []
    release = asyncio.Event()

    async def hold(key: str) -> None:
        async with locks.hold(key):
            inside.append(key)
            await release.wait()

    tasks = [asyncio.create_task(hold(k)) for k in ("a", "a", "b")]
    for _ in range(5):
        await asyncio.sleep(0)
    assert sorted(inside) == ["a", "b"]  # the second "a" waits
    assert len(locks) == 2
    release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert inside.count("a") == 2
    assert len(locks) == 0


async def test_a_failed_or_cancelled_holder_leaves_no_entry() -> None:
    locks: KeyedLocks[tuple[str, str]] = KeyedLocks()
    with pytest.raises(RuntimeError):
        async with locks.hold(("s", "u")):
            raise RuntimeError("refused upstream")
    assert len(locks) == 0
    gate = asyncio.Event()

    async def holder() -> None:
        async with locks.hold(("s", "u")):
            await gate.wait()

    first = asyncio.create_task(holder())
    waiter = asyncio.create_task(holder())
    for _ in range(5):
        await asyncio.sleep(0)
    waiter.cancel()  # cancelled while waiting for the lock
    gate.set()
    await asyncio.wait_for(first, 5)
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert len(locks) == 0
