"""Calls: the bounds one call's upstream cannot get past (its answers' fan-out, its
whole time), tested on the class itself with a small carrier of the test's own."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Mapping
from typing import Any

from gateway.upstream.calls import ANSWERS_AT_ONCE, Calls
from gateway.upstream.carriers.base import Carrier, CarrierError, Message, UpstreamReply


class HeldSends(Carrier):
    """Every send waits for ``gate``; counts how many are in flight at once."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.now = 0
        self.most = 0
        self.sent: list[Message] = []
        self.arrived = asyncio.Condition()

    async def start(self) -> None:
        return None

    async def request(self, message: Message, headers: Mapping[str, str]) -> UpstreamReply:
        raise CarrierError("not used here")

    async def send(self, message: Message, headers: Mapping[str, str]) -> None:
        async with self.arrived:
            self.now += 1
            self.most = max(self.most, self.now)
            self.arrived.notify_all()
        await self.gate.wait()
        self.now -= 1
        self.sent.append(message)
        if message.get("id") == "boom":
            raise CarrierError("refused")

    async def listen(self, headers: Mapping[str, str]) -> AsyncIterator[Message] | None:
        return None

    async def terminate(self, headers: Mapping[str, str]) -> None:
        return None

    async def close(self) -> None:
        return None


async def test_answers_to_a_flood_go_out_a_few_at_a_time() -> None:
    calls = Calls(itertools.count(1))
    carrier = HeldSends()
    answers: list[dict[str, Any]] = [{"jsonrpc": "2.0", "id": n, "result": {}} for n in range(50)]
    sends = [asyncio.create_task(calls.send_answer(carrier, a, {})) for a in answers]
    async with asyncio.timeout(10), carrier.arrived:
        await carrier.arrived.wait_for(lambda: carrier.now == ANSWERS_AT_ONCE)
    carrier.gate.set()
    async with asyncio.timeout(10):
        await asyncio.gather(*sends)
    assert carrier.most == ANSWERS_AT_ONCE  # unbounded, all 50 would be in flight
    assert len(carrier.sent) == 50


async def test_a_refused_answer_is_no_error_of_the_call() -> None:
    calls = Calls(itertools.count(1))
    carrier = HeldSends()
    carrier.gate.set()
    await calls.send_answer(carrier, {"jsonrpc": "2.0", "id": "boom", "result": {}}, {})
    assert carrier.sent and carrier.now == 0
