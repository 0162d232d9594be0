"""Heartbeat (gateway/transport/heartbeat.py): a beat after each `every` seconds of
silence, none while something is written, none after stop, none after a failed beat.

On a virtual-time loop (tests/unit/virtual_time.py): the times asserted are exact."""

from __future__ import annotations

import asyncio

from gateway.transport.heartbeat import Heartbeat
from tests.unit.virtual_time import run

EVERY = 15.0


def test_a_quiet_stream_beats_again_and_again_every_period() -> None:
    async def scenario() -> list[float]:
        loop = asyncio.get_running_loop()
        beats: asyncio.Queue[float] = asyncio.Queue()

        async def beat() -> None:
            beats.put_nowait(loop.time())

        started = loop.time()
        heart = Heartbeat(EVERY, beat)
        heart.start()
        times = [await beats.get() - started for _ in range(3)]
        await heart.aclose()
        return times

    assert run(scenario()) == [EVERY, 2 * EVERY, 3 * EVERY]


def test_writes_put_the_beat_off_and_the_silence_counts_from_the_last_write() -> None:
    async def scenario() -> tuple[list[float], float]:
        loop = asyncio.get_running_loop()
        beats: list[float] = []
        beat_came = asyncio.Event()

        async def beat() -> None:
            beats.append(loop.time())
            beat_came.set()

        started = loop.time()
        heart = Heartbeat(EVERY, beat)
        heart.start()
        for _ in range(6):  # a write every half period: never quiet for a whole one
            await asyncio.sleep(EVERY / 2)
            heart.wrote()
        last_write = loop.time() - started
        await beat_came.wait()
        await heart.aclose()
        return [b - started for b in beats], last_write

    beats, last_write = run(scenario())
    assert last_write == 6 * EVERY / 2
    assert beats == [last_write + EVERY]


def test_stop_ends_the_beats() -> None:
    async def scenario() -> list[float]:
        beats: list[float] = []

        async def beat() -> None:
            beats.append(asyncio.get_running_loop().time())

        heart = Heartbeat(EVERY, beat)
        heart.start()
        await asyncio.sleep(EVERY * 0.9)
        heart.stop()
        await asyncio.sleep(EVERY * 100)  # long past when beats would have come
        return beats

    assert run(scenario()) == []


def test_a_failed_beat_stops_the_heart() -> None:
    async def scenario() -> int:
        calls = 0

        async def gone() -> None:
            nonlocal calls
            calls += 1
            raise ConnectionResetError("the client went away")

        heart = Heartbeat(EVERY, gone)
        heart.start()
        await asyncio.sleep(EVERY * 100)  # long past when next beats would have come
        return calls

    assert run(scenario()) == 1
