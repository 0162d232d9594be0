"""Findings 2 and 4: one caller's flood costs only that caller.

Sessions and parked calls are bounded per principal and in all.  A caller at its
own bound is refused with a clear error (429) and nobody else's entry goes.  When
the gateway's bound is reached, the newcomer is not refused while someone holds
more than it does: the heaviest holder's least recently used idle entry gives
way (503 only when nobody can).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import aiohttp

from tests.e2e.fake_client import (
    base_headers,
    initialize,
    modern_headers,
    modern_request,
    open_session,
    post,
    request,
    session_headers,
    text_of,
)
from tests.security.harness import gateway

ALICE = {"Authorization": "Bearer alice-token"}
CAPS = "io.modelcontextprotocol/clientCapabilities"


async def _initialize(http: aiohttp.ClientSession, url: str, who: dict[str, str]) -> int:
    reply = await post(http, url, initialize(0), {**base_headers(), **who})
    return reply.status


async def _session(http: aiohttp.ClientSession, url: str, who: dict[str, str]) -> str | None:
    reply = await post(http, url, initialize(0), {**base_headers(), **who})
    return reply.session_id if reply.status == 200 else None


async def _alive(
    http: aiohttp.ClientSession, url: str, session_id: str, who: dict[str, str]
) -> int:
    body = request(1, "tools/call", {"name": "echo", "arguments": {"text": "here"}})
    reply = await post(http, url, body, {**session_headers(session_id), **who})
    return reply.status


async def test_a_session_flood_costs_the_flood_never_an_innocent(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str
) -> None:
    limits = {"max_sessions_per_principal": 5, "max_sessions": 12}
    with gateway(tmp_path, upstream, settings=limits) as gw:
        url = gw.url()
        alice = await open_session(http, url, headers=ALICE)
        # Anonymous: five sessions, then 429 (its own quota), with a JSON-RPC error.
        statuses = [await _initialize(http, url, {}) for _ in range(5)]
        assert statuses == [200] * 5
        anonymous = [await _session(http, url, {}) for _ in range(5)]
        assert anonymous == [None] * 5
        over = await post(http, url, initialize(3), base_headers())
        assert over.error["code"] == -32000 and "at most 5" in over.error["message"]
        # Ten more principals: the store (12 in all) is full after six of them; each
        # newcomer then gets in as the heaviest holder's (anonymous) oldest idle
        # session gives way, never the lighter alice's.
        made = [await _session(http, url, {"Authorization": f"Bearer t{n}"}) for n in range(10)]
        assert all(made), made
        assert await _alive(http, url, alice, ALICE) == 200
        assert await _alive(http, url, str(made[0]), {"Authorization": "Bearer t0"}) == 200
        log = gw.log()
        assert log.count("ended an idle session to make room for another caller") == 4
        assert '"route": "/mcp"' in log


async def _greet(http: aiohttp.ClientSession, url: str, who: dict[str, str], id_: int) -> Any:
    body = modern_request(id_, "tools/call", {"name": "greet_me", "arguments": {}})
    body["params"]["_meta"][CAPS] = {"elicitation": {}}
    return await post(http, url, body, {**modern_headers("tools/call", "greet_me"), **who})


async def _answer(
    http: aiohttp.ClientSession, url: str, who: dict[str, str], asked: dict[str, Any], answers: Any
) -> Any:
    params = {
        "name": "greet_me",
        "arguments": {},
        "requestState": asked["requestState"],
        "inputResponses": answers,
    }
    body = modern_request(99, "tools/call", params)
    body["params"]["_meta"][CAPS] = {"elicitation": {}}
    return await post(http, url, body, {**modern_headers("tools/call", "greet_me"), **who})


async def _parked(http: aiohttp.ClientSession, base: str) -> float:
    async with http.get(base + "/metrics") as resp:
        text = await resp.text()
    found = re.findall(r'^gateway_parked_calls\{route="/mcp"\} (\S+)$', text, re.M)
    return float(found[0])


async def test_a_parked_call_flood_evicts_only_its_own(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str
) -> None:
    limits = {"max_parked_per_principal": 10, "max_parked": 40}
    with gateway(tmp_path, upstream, settings=limits) as gw:
        url = gw.url()
        asked = (await _greet(http, url, ALICE, 1)).result
        assert asked["resultType"] == "input_required"
        # An anonymous caller parks (and abandons) 60 calls: it keeps at most 10.
        flood = await asyncio.gather(*(_greet(http, url, {}, 100 + n) for n in range(60)))
        assert all(r.result["resultType"] == "input_required" for r in flood)
        assert await _parked(http, gw.base) == 11
        # Alice's call waited through it all.
        key = next(iter(asked["inputRequests"]))
        done = await _answer(
            http, url, ALICE, asked, {key: {"action": "accept", "content": {"name": "Alice"}}}
        )
        assert text_of(done.result) == "Hello, Alice!"


async def test_a_full_parking_table_makes_room_from_the_heaviest_holder(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str
) -> None:
    limits = {"max_parked_per_principal": 3, "max_parked": 5}
    with gateway(tmp_path, upstream, settings=limits) as gw:
        url = gw.url()
        mallory = {"Authorization": "Bearer mallory"}
        asked = (await _greet(http, url, ALICE, 1)).result
        flood = [(await _greet(http, url, mallory, n)).result for n in range(3)]
        trudy = await _greet(http, url, {"Authorization": "Bearer trudy"}, 9)
        assert trudy.status == 200 and await _parked(http, gw.base) == 5
        # Full: an innocent newcomer gets in; mallory's oldest parked call gives way.
        bob = await _greet(http, url, {"Authorization": "Bearer bob"}, 10)
        assert bob.result["resultType"] == "input_required", bob.text
        assert await _parked(http, gw.base) == 5
        key = next(iter(flood[0]["inputRequests"]))
        gone = await _answer(http, url, mallory, flood[0], {key: {"action": "decline"}})
        assert gone.status == 400 and "ended or expired" in gone.error["message"], gone.text
        # Alice, lighter than mallory, kept hers.
        key = next(iter(asked["inputRequests"]))
        done = await _answer(
            http, url, ALICE, asked, {key: {"action": "accept", "content": {"name": "Alice"}}}
        )
        assert text_of(done.result) == "Hello, Alice!"
        assert "released a parked call to make room for another caller" in gw.log()


async def test_input_responses_must_answer_what_was_asked(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str
) -> None:
    """Finding 10: malformed inputResponses are refused, never forwarded; the round
    stays open for a proper answer."""
    with gateway(tmp_path, upstream) as gw:
        url = gw.url()
        asked = (await _greet(http, url, ALICE, 1)).result
        key = next(iter(asked["inputRequests"]))
        for bad in (
            {"nope": {"action": "accept", "content": {"name": "x"}}},
            {key: {"action": "maybe"}},
            {key: {"action": "accept", "content": "Alice"}},
            {key: "Alice"},
            ["Alice"],
        ):
            reply = await _answer(http, url, ALICE, asked, bad)
            assert reply.status == 400 and reply.error["code"] == -32602, (bad, reply.text)
        done = await _answer(
            http, url, ALICE, asked, {key: {"action": "accept", "content": {"name": "Alice"}}}
        )
        assert text_of(done.result) == "Hello, Alice!"
