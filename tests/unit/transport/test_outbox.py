"""The session outbox: asyncio.Queue's behaviour for a standalone stream, lighter."""

from __future__ import annotations

import asyncio
import sys

import pytest

from gateway.transport.outbox import Outbox


def test_first_in_first_out_within_the_bound() -> None:
    box: Outbox[int] = Outbox(3)
    for n in range(3):
        box.put_nowait(n)
    with pytest.raises(asyncio.QueueFull):
        box.put_nowait(3)
    assert box.qsize() == 3
    assert [box.get_nowait() for _ in range(3)] == [0, 1, 2]
    with pytest.raises(asyncio.QueueEmpty):
        box.get_nowait()
    box.put_nowait(4)  # room again once read
    assert box.qsize() == 1


async def test_a_waiting_reader_gets_what_is_put() -> None:
    box: Outbox[str] = Outbox(8)
    reader = asyncio.ensure_future(box.get())
    await asyncio.sleep(0)
    assert not reader.done()
    box.put_nowait("a")
    box.put_nowait("b")
    assert await asyncio.wait_for(reader, 1) == "a"
    assert await asyncio.wait_for(box.get(), 1) == "b"


async def test_readers_are_served_in_turn() -> None:
    box: Outbox[int] = Outbox(8)
    first = asyncio.ensure_future(box.get())
    second = asyncio.ensure_future(box.get())
    await asyncio.sleep(0)
    box.put_nowait(1)
    assert await asyncio.wait_for(first, 1) == 1
    assert not second.done()
    box.put_nowait(2)
    assert await asyncio.wait_for(second, 1) == 2


async def test_a_cancelled_reader_leaves_its_item_to_the_next() -> None:
    box: Outbox[int] = Outbox(8)
    gone = asyncio.ensure_future(box.get())
    staying = asyncio.ensure_future(box.get())
    await asyncio.sleep(0)
    box.put_nowait(7)  # wakes `gone` ...
    gone.cancel()  # ... which leaves before it runs
    assert await asyncio.wait_for(staying, 1) == 7
    assert gone.cancelled()
    assert box.qsize() == 0


async def test_a_reader_timing_out_leaves_nothing_behind() -> None:
    box: Outbox[int] = Outbox(8)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await box.get()
    box.put_nowait(1)
    assert box.get_nowait() == 1


def test_an_idle_outbox_is_small() -> None:
    """The reason it exists: an empty one holds no deque and no future."""
    box: Outbox[int] = Outbox(8)
    queue: asyncio.Queue[int] = asyncio.Queue(8)
    assert sys.getsizeof(box) < sys.getsizeof(queue._queue)  # type: ignore[attr-defined]
