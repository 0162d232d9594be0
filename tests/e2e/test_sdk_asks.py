"""Asks against a real SDK server: a 2026-07-28 client through the gateway to the
TypeScript SDK 1.32 server (2025-11-25, stateful), whose tools ask mid-call.

- `ask_three` asks three questions at once (elicitation, sampling, roots with
  Promise.all): the client gets them in ONE input_required round; its roots, as
  every stateless client's on a route whose server uses roots, come in a round of
  their own first (the pool then holds them and answers the server's roots/list).
- `ask_declared` asks for whatever the session's client declared: a client that
  declared only sampling is asked only for sampling, since the gateway pools
  upstream sessions by the capabilities it projects for the caller.
- `ask_url` asks with a URL-mode elicitation (2025-11-25).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from tests.e2e.fake_client import (
    NEWEST_HANDSHAKE,
    WAIT,
    SseReader,
    assert_clean_log,
    post,
    request,
    session_headers,
    text_of,
)
from tests.e2e.gateway_proc import RunningGateway
from tests.e2e.sdk_peers import (
    ADA,
    ALL_ASKS,
    SAMPLED,
    SDK1,
    ModernClient,
    answer_for,
    complete_text,
    gateway_before,
    input_required,
    legacy_session,
    sdk_peer,
    who,
)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    with gateway_before(sdk_peer(SDK1), tmp_path_factory.mktemp("gw-sdk-asks")) as running:
        yield running
        assert_clean_log(running.log())


def client(
    http: aiohttp.ClientSession, gw: RunningGateway, caps: dict[str, object]
) -> ModernClient:
    return ModernClient(http, gw.url("/mcp"), caps, who())


async def test_three_concurrent_asks_come_in_one_round(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    alice = client(http, gw, ALL_ASKS)
    requests, state = input_required(await alice.call("ask_three"))
    # The server asks roots inside the call only: they come in the call's one round,
    # not in one of their own first (docs/using/sessions.md).
    methods = sorted(r["method"] for r in requests.values())
    assert methods == ["elicitation/create", "roots/list", "sampling/createMessage"], requests
    answers = {key: answer_for(r["method"]) for key, r in requests.items()}
    done = await alice.call("ask_three", responses=answers, state=state)
    assert complete_text(done) == "name=Ada; sample=sampled words; roots=file:///tmp/root-a"


@pytest.mark.parametrize(
    ("caps", "asked", "text"),
    [
        ({"sampling": {}}, ["sampling/createMessage"], "declared=sampling; sampling:sampled words"),
        (
            {"elicitation": {"form": {}}},
            ["elicitation/create"],
            "declared=elicitation; elicitation:Ada",
        ),
        ({"roots": {}}, ["roots/list"], "declared=roots; roots:1"),
    ],
    ids=["sampling-only", "elicitation-only", "roots-only"],
)
async def test_upstream_asks_only_what_the_client_declared(
    http: aiohttp.ClientSession,
    gw: RunningGateway,
    caps: dict[str, object],
    asked: list[str],
    text: str,
) -> None:
    caller = client(http, gw, caps)
    requests, state = input_required(await caller.call("ask_declared"))
    assert [r["method"] for r in requests.values()] == asked, requests
    answers = {key: answer_for(r["method"]) for key, r in requests.items()}
    assert complete_text(await caller.call("ask_declared", responses=answers, state=state)) == text


async def test_one_principal_two_capability_sets_get_two_upstream_sessions(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    # The same caller declaring different capabilities per request: each request
    # is asked according to its own declaration, never the other's.
    sampler = client(http, gw, {"sampling": {}})
    eliciter = ModernClient(http, sampler.url, {"elicitation": {"form": {}}}, sampler.auth)
    for caller, method, answer in (
        (sampler, "sampling/createMessage", SAMPLED),
        (eliciter, "elicitation/create", ADA),
        (sampler, "sampling/createMessage", SAMPLED),
    ):
        requests, state = input_required(await caller.call("ask_declared"))
        assert [r["method"] for r in requests.values()] == [method], requests
        key = next(iter(requests))
        done = await caller.call("ask_declared", responses={key: answer}, state=state)
        assert complete_text(done).startswith("declared=")


async def test_url_elicitation_reaches_a_modern_client(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    caller = client(http, gw, {"elicitation": {"form": {}, "url": {}}})
    requests, state = input_required(await caller.call("ask_url", {"id": "e-17"}))
    (key, asked), *rest = requests.items()
    assert rest == [], requests
    assert asked["method"] == "elicitation/create"
    params = asked["params"]
    assert params["mode"] == "url", params
    assert params["url"] == "https://example.com/login/e-17"
    # 2026-07-28 dropped elicitationId (the retry says the step is done).
    assert "elicitationId" not in params, params
    done = await caller.call(
        "ask_url", {"id": "e-17"}, responses={key: {"action": "accept"}}, state=state
    )
    assert complete_text(done) == "url elicitation e-17: accept"


async def test_url_elicitation_pushed_to_a_2025_11_25_client(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    # Same era on both sides: the SDK's URL elicitation reaches the client whole,
    # pushed on the call's stream, and the client's answer reaches the tool.
    url = gw.url("/mcp")
    auth = {"Authorization": who()}
    session = await legacy_session(http, url, {"elicitation": {"form": {}, "url": {}}}, auth)
    headers = {**session_headers(session, NEWEST_HANDSHAKE), **auth}
    body = request(5, "tools/call", {"name": "ask_url", "arguments": {"id": "e-18"}})

    async def run() -> dict[str, Any]:
        async with http.post(url, json=body, headers=headers) as response:
            assert response.status == 200
            reader = SseReader(response)
            asked = await reader.next_message()
            assert asked.get("method") == "elicitation/create", asked
            params = asked["params"]
            assert params["mode"] == "url", params
            assert params["elicitationId"] == "e-18", params
            assert params["url"] == "https://example.com/login/e-18", params
            answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}
            accepted = await post(http, url, answer, headers)
            assert accepted.status == 202, accepted.text
            return await reader.response_to(5)

    final = await asyncio.wait_for(run(), WAIT * 2)
    assert text_of(final["result"]) == "url elicitation e-18: accept", final


async def test_three_concurrent_asks_pushed_to_a_2025_11_25_client_at_once(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    # All three requests reach the client before it answers any of them.
    url = gw.url("/mcp")
    auth = {"Authorization": who()}
    session = await legacy_session(http, url, ALL_ASKS, auth)
    headers = {**session_headers(session, NEWEST_HANDSHAKE), **auth}
    body = request(6, "tools/call", {"name": "ask_three", "arguments": {}})

    async def run() -> dict[str, Any]:
        async with http.post(url, json=body, headers=headers) as response:
            assert response.status == 200
            reader = SseReader(response)
            asked = [await reader.next_message() for _ in range(3)]
            methods = sorted(str(m.get("method")) for m in asked)
            assert methods == ["elicitation/create", "roots/list", "sampling/createMessage"]
            for message in asked:
                result = answer_for(message["method"])
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
                accepted = await post(http, url, reply, headers)
                assert accepted.status == 202, accepted.text
            return await reader.response_to(6)

    final = await asyncio.wait_for(run(), WAIT * 2)
    assert text_of(final["result"]) == "name=Ada; sample=sampled words; roots=file:///tmp/root-a"
