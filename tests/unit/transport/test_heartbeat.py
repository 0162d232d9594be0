"""Heartbeat (gateway/transport/heartbeat.py): a beat after each `every` seconds of
silence, none while something is written, none after stop, none after a failed beat."""

from __future__ import annotations

import asyncio

from gateway.transport.heartbeat import Heartbeat

EVERY = 0.05
WITHIN = 5.0


async def test_a_quiet_stream_beats_again_and_again() -> None:
    beats: asyncio.Queue[float] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def beat() -> None:
        beats.put_nowait(loop.time())

    heart = Heartbeat(EVERY, beat)
    started = loop.time()
    heart.start()
    first = await asyncio.wait_for(beats.get(), WITHIN)
    second = await asyncio.wait_for(beats.get(), WITHIN)
    await heart.aclose()
    assert first - started >= EVERY * 0.9 and second - first >= EVERY * 0.9


async def test_writes_put_the_beat_off_and_stop_ends_it() -> None:
    beats: list[float] = []
    loop = asyncio.get_running_loop()

    async def beat() -> None:
        beats.append(loop.time())

    heart = Heartbeat(EVERY, beat)
    heart.start()
    for _ in range(6):  # busy: a write every half period (time passing is the test)
        await asyncio.sleep(EVERY / 2)
        heart.wrote()
    assert beats == []  # never quiet for a whole period
    heart.stop()
    await asyncio.sleep(EVERY * 3)  # past when a beat would have come
    assert beats == []


async def test_a_failed_beat_stops_the_heart() -> None:
    calls = 0
    failed = asyncio.Event()

    async def gone() -> None:
        nonlocal calls
        calls += 1
        failed.set()
        raise ConnectionResetError("the client went away")

    heart = Heartbeat(EVERY, gone)
    heart.start()
    await asyncio.wait_for(failed.wait(), WITHIN)
    await asyncio.sleep(EVERY * 3)  # past when a next beat would have come
    assert calls == 1
