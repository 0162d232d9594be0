"""Unsolicited: a pool's questions asked outside any call are held, within a bound."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, cast

from gateway.core import ServerProfile
from gateway.protocol import AdapterSet
from gateway.upstream.calls import Calls
from gateway.upstream.carriers.base import Carrier
from gateway.upstream.open_session import UpstreamSession
from gateway.upstream.unsolicited import HELD_TTL, MAX_HELD, Unsolicited

ADAPTER = next(a for a in AdapterSet.default().adapters if a.version == "2025-06-18")


def pool_session() -> UpstreamSession:
    # The carrier is never used: nothing is sent while a question is held.
    carrier = cast(Carrier, object())
    return UpstreamSession(adapter=ADAPTER, carrier=carrier, profile=ServerProfile(), key="p:x")


def roots_request(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "method": "roots/list", "params": {}}


async def test_a_pool_holds_a_bounded_number_of_questions() -> None:
    unsolicited = Unsolicited(Calls(itertools.count(1)), "http://upstream.invalid/mcp")
    session = pool_session()
    held = [
        asyncio.ensure_future(unsolicited._hold(session, roots_request(n))) for n in range(MAX_HELD)
    ]
    await asyncio.sleep(0)  # each registers before it waits
    assert len(session.held) == MAX_HELD
    # One more is refused at once (an error answer for the upstream), not held.
    extra = await asyncio.wait_for(
        unsolicited._hold(session, roots_request(MAX_HELD)), HELD_TTL / 10
    )
    assert "error" in extra and extra["id"] == MAX_HELD
    assert len(session.held) == MAX_HELD
    for task in held:
        task.cancel()
    await asyncio.gather(*held, return_exceptions=True)
    assert len(session.held) == 0
