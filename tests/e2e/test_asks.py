"""Asks across eras, end to end: `gateway serve` as a subprocess, raw HTTP on loopback.

A 2026-07-28 (stateless) client in front of a handshake-era upstream that asks
mid-call (tests/e2e/fake_upstreams.py, behaviour `ask`, run in the test's own
loop): the call is parked, the client gets `input_required` with a sealed
`requestState`, its retry answers the upstream's pending request.  The state is
bound to the caller, the route, the tool and its arguments, and is good for one
round only; a parked call the client abandons is released at its deadline (the
upstream's ask refused, its call cancelled).

And the other way round: a 2025-06-18 client in front of a 2026-07-28 upstream
(the official TypeScript SDK v2 server, legacy traffic rejected) gets the
upstream's `input_required` pushed to it as a server request on its POST's SSE
stream; its answer completes the call.

The fake upstream listens on one port for the whole module (the gateway's route
points there) but a fresh instance serves each test, so no test sees another's
calls.  Every wait is bounded; nothing sleeps to synchronise.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import pytest
from peers.registry import peer, require_installed, running_server

from tests.e2e.fake_client import (
    INFO,
    WAIT,
    Reply,
    SseReader,
    assert_clean_log,
    base_headers,
    initialize,
    modern_headers,
    notification,
    post,
    request,
    session_headers,
    text_of,
)
from tests.e2e.fake_upstreams import ASK_COLOUR, ASK_NAME, ASK_SAMPLE, FakeUpstream
from tests.e2e.gateway_proc import HeldPort, RunningGateway, gateway
from tests.e2e.sdk_peers import modern_call

# The parked calls' (and requestStates') lifetime in the gateway under test.
PARK_TTL = 3.0
# The parking table's grace before it cancels an upstream call that ignores a refusal.
GRACE = 2.0
# Bound on waiting for an abandoned call to be released: deadline + grace + slack.
RELEASE_WITHIN = PARK_TTL + GRACE + 8.0

ELICIT_CAPS: dict[str, Any] = {"elicitation": {"form": {}}}
ALL_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}}
ADA = {"action": "accept", "content": {"name": "Ada"}}
BLUE = {"action": "accept", "content": {"colour": "blue"}}
SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "sampled words"},
    "model": "test-model",
    "stopReason": "endTurn",
}


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def ask_port() -> Iterator[int]:
    with HeldPort() as held:  # the fakes of every test (and restarts) bind it in turn
        yield held.port


@pytest.fixture(scope="module")
def gw(ask_port: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    upstream = f"http://127.0.0.1:{ask_port}/mcp"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GATEWAY_PARK_TTL", str(PARK_TTL))
        manager = gateway(f"/mcp={upstream}", tmp_path=tmp_path_factory.mktemp("gw-asks"))
        running = manager.__enter__()
    try:
        yield running
        assert_clean_log(running.log())
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture
def url(gw: RunningGateway) -> Iterator[str]:
    yield gw.url("/mcp")
    assert gw.process.poll() is None, f"the gateway died:\n{gw.log()[-4000:]}"


@pytest.fixture
async def fake(ask_port: int) -> AsyncIterator[FakeUpstream]:
    upstream = FakeUpstream("ask")
    await upstream.start(ask_port)
    try:
        yield upstream
    finally:
        await upstream.stop()


@pytest.fixture
def client(http: aiohttp.ClientSession, url: str, fake: FakeUpstream) -> Client:
    return Client(http, url, f"alice-{uuid.uuid4().hex[:12]}")


# --------------------------------------------------------------------------- the client


def call_body(
    name: str,
    arguments: dict[str, Any],
    *,
    caps: dict[str, Any] | None = None,
    responses: dict[str, Any] | None = None,
    state: str | None = None,
    id_: Any = 1,
) -> dict[str, Any]:
    return modern_call(
        name,
        arguments,
        ELICIT_CAPS if caps is None else caps,
        responses=responses,
        state=state,
        id_=id_,
        meta={INFO: {"name": "e2e-asks", "version": "0"}},
    )


@dataclass
class Client:
    """A 2026-07-28 client: every request a tools/call as `who` (its Authorization).

    Each test gets principals of its own: the gateway keeps one upstream session
    per principal, and each test has a fresh upstream instance (see `fake`)."""

    http: aiohttp.ClientSession
    url: str
    who: str

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        who: str | None = None,
        **kwargs: Any,
    ) -> Reply:
        headers = modern_headers("tools/call", name)
        headers["Authorization"] = f"Bearer {who or self.who}"
        body = call_body(name, arguments or {}, **kwargs)
        return await post(self.http, self.url, body, headers)


def input_required(reply: Reply) -> tuple[dict[str, Any], str]:
    """The inputRequests and requestState of an input_required result."""
    assert reply.status == 200, reply.text
    result = reply.result
    assert result.get("resultType") == "input_required", result
    requests = result["inputRequests"]
    state = result["requestState"]
    assert isinstance(requests, dict) and requests, result
    assert isinstance(state, str) and state.startswith("gw1."), result
    return requests, state


def complete_text(reply: Reply) -> str:
    assert reply.status == 200, reply.text
    assert reply.result.get("resultType") == "complete", reply.result
    return text_of(reply.result)


def assert_refused(reply: Reply, why: str) -> None:
    """-32602 with HTTP 400, and a message that says why."""
    assert reply.status == 400, (reply.status, reply.text)
    assert reply.error["code"] == -32602, reply.error
    assert why in reply.error["message"], reply.error


def only_key(requests: dict[str, Any]) -> str:
    assert len(requests) == 1, requests
    return next(iter(requests))


def tamper(state: str) -> str:
    """The same state with one claim changed (the tag left as it was)."""
    body, tag = state.removeprefix("gw1.").split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["n"] = int(claims.get("n", 1)) + 1
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"gw1.{forged}.{tag}"


# --------------------------------------------------------------------------- rounds


async def test_ask_then_retry_with_the_answer_completes(client: Client, fake: FakeUpstream) -> None:
    first = await client.call("ask_name")
    requests, state = input_required(first)
    key = only_key(requests)
    assert requests[key]["method"] == "elicitation/create"
    assert requests[key]["params"] == ASK_NAME
    assert fake.answers == []  # the upstream's request is still pending
    second = await client.call("ask_name", responses={key: ADA}, state=state)
    assert complete_text(second) == "hello Ada"
    # The upstream saw exactly the client's answer, once, to its own request.
    answers = await fake.wait_answers(1, WAIT)
    assert len(answers) == 1
    assert answers[0]["id"] == fake.asked[0]["id"]
    assert answers[0]["result"] == ADA
    assert fake.calls == 1  # one upstream call across both client requests
    assert fake.cancelled == []


async def test_two_asks_in_one_call_take_two_rounds(client: Client, fake: FakeUpstream) -> None:
    requests, state = input_required(await client.call("ask_twice"))
    first_key = only_key(requests)
    assert requests[first_key]["params"] == ASK_NAME
    round_two = await client.call("ask_twice", responses={first_key: ADA}, state=state)
    requests, state2 = input_required(round_two)
    second_key = only_key(requests)
    assert second_key != first_key
    assert requests[second_key]["params"] == ASK_COLOUR
    assert state2 != state
    done = await client.call("ask_twice", responses={second_key: BLUE}, state=state2)
    assert complete_text(done) == "hello Ada, blue"
    assert [a["result"] for a in fake.answers] == [ADA, BLUE]
    assert fake.calls == 1


async def test_sampling_ask_round_trip(client: Client, fake: FakeUpstream) -> None:
    requests, state = input_required(await client.call("ask_sample", caps=ALL_CAPS))
    key = only_key(requests)
    assert requests[key]["method"] == "sampling/createMessage"
    assert requests[key]["params"] == ASK_SAMPLE
    done = await client.call("ask_sample", caps=ALL_CAPS, responses={key: SAMPLED}, state=state)
    assert complete_text(done) == "hello sampled words"
    assert [a["result"] for a in fake.answers] == [SAMPLED]


async def test_retry_missing_the_answer_asks_again(client: Client, fake: FakeUpstream) -> None:
    requests, state = input_required(await client.call("ask_name"))
    key = only_key(requests)
    again = await client.call("ask_name", responses={}, state=state)
    requests2, state2 = input_required(again)
    assert requests2 == requests  # the same ask, under the same key
    assert state2 != state
    # An answer under a key nobody asked is refused (invalid params), never forwarded;
    # the round stays open for a proper answer.
    third = await client.call("ask_name", responses={"no-such-key": ADA}, state=state2)
    assert_refused(third, "no input request")
    assert fake.answers == []
    # The round moved on: the earlier state is spent.
    assert_refused(await client.call("ask_name", responses={key: ADA}, state=state), "already used")
    done = await client.call("ask_name", responses={key: ADA}, state=state2)
    assert complete_text(done) == "hello Ada"
    assert [a["result"] for a in fake.answers] == [ADA]
    assert fake.calls == 1


# --------------------------------------------------------------------------- abandoned


async def test_an_abandoned_call_is_released_at_its_deadline(
    client: Client, fake: FakeUpstream
) -> None:
    fake.linger = True  # the upstream ignores the refusal: the gateway must cancel it
    loop = asyncio.get_running_loop()
    started = loop.time()
    requests, state = input_required(await client.call("ask_name"))
    assert fake.call_ids, "the upstream saw no call"
    upstream_id = fake.call_ids[0]
    # The client never retries.  At the deadline the ask is refused...
    answers = await fake.wait_answers(1, RELEASE_WITHIN)
    assert answers[0]["id"] == fake.asked[0]["id"]
    assert answers[0]["result"] == {"action": "cancel"}
    # Not before the deadline.  A lower bound only (a busy machine can only make it
    # later), on the one system-wide monotonic clock the gateway's timer also runs on,
    # read before the call was parked: no slack is needed.
    assert loop.time() - started >= PARK_TTL
    # ... and the upstream call is cancelled.
    await fake.wait_for(lambda: upstream_id in fake.cancelled, RELEASE_WITHIN)
    # A late retry finds nothing to resume.
    late = await client.call("ask_name", responses={only_key(requests): ADA}, state=state)
    assert late.status == 400 and late.error["code"] == -32602, late.text
    assert len(fake.answers) == 1


async def test_an_upstream_that_lost_its_sessions_gets_a_new_one(
    client: Client, fake: FakeUpstream, ask_port: int
) -> None:
    assert complete_text(await client.call("echo", {"text": "one"})) == "echo: one"
    await fake.stop()  # the upstream restarts: its sessions are gone
    restarted = FakeUpstream("ask")
    await restarted.start(ask_port)
    try:
        reply = await client.call("echo", {"text": "two"})
        assert complete_text(reply) == "echo: two"
        assert restarted.initializes == 1
    finally:
        await restarted.stop()


# --------------------------------------------------------------------------- security


async def test_a_state_the_gateway_did_not_seal_is_refused_and_reruns_nothing(
    client: Client, fake: FakeUpstream
) -> None:
    """A handshake-era upstream keeps no state of its own: a foreign requestState is
    refused (it used to rerun the tool and drop the client's answers)."""
    requests, state = input_required(await client.call("ask_name"))
    key = only_key(requests)
    for foreign in ("someone-elses-state", "eyJhbGciOiJub25lIn0.e30.", "gw2.x.y"):
        assert_refused(
            await client.call("ask_name", responses={key: ADA}, state=foreign),
            "not issued by this gateway",
        )
    assert fake.calls == 1  # the tool was not run again
    assert fake.answers == []
    done = await client.call("ask_name", responses={key: ADA}, state=state)
    assert complete_text(done) == "hello Ada"


async def test_tampered_state_is_refused_and_resumes_nothing(
    client: Client, fake: FakeUpstream
) -> None:
    requests, state = input_required(await client.call("ask_name"))
    key = only_key(requests)
    assert_refused(
        await client.call("ask_name", responses={key: ADA}, state=tamper(state)), "not valid"
    )
    flipped = state[:-3] + ("A" if state[-3] != "A" else "B") + state[-2:]
    assert_refused(await client.call("ask_name", responses={key: ADA}, state=flipped), "not valid")
    assert_refused(
        await client.call("ask_name", responses={key: ADA}, state="gw1.garbage"),
        "not valid",
    )
    assert fake.answers == []
    # The parked call is still there for its rightful retry.
    done = await client.call("ask_name", responses={key: ADA}, state=state)
    assert complete_text(done) == "hello Ada"
    assert [a["result"] for a in fake.answers] == [ADA]


async def test_state_replayed_by_another_principal_is_refused(
    client: Client, fake: FakeUpstream
) -> None:
    requests, state = input_required(await client.call("ask_name"))
    key = only_key(requests)
    mallory = f"mallory-{uuid.uuid4().hex[:12]}"
    evil = {"action": "accept", "content": {"name": "Mallory"}}
    assert_refused(
        await client.call("ask_name", who=mallory, responses={key: evil}, state=state),
        "another caller",
    )
    # No credentials at all is another caller too.
    headers = modern_headers("tools/call", "ask_name")
    body = call_body("ask_name", {}, responses={key: evil}, state=state)
    anonymous = await post(client.http, client.url, body, headers)
    assert_refused(anonymous, "another caller")
    assert fake.answers == []
    done = await client.call("ask_name", responses={key: ADA}, state=state)
    assert complete_text(done) == "hello Ada"
    assert [a["result"] for a in fake.answers] == [ADA]


async def test_state_used_with_another_tool_or_arguments_is_refused(
    client: Client, fake: FakeUpstream
) -> None:
    arguments = {"greeting": "hi"}
    requests, state = input_required(await client.call("ask_name", arguments))
    key = only_key(requests)
    for name, args in (
        ("ask_twice", arguments),
        ("echo", arguments),
        ("ask_name", {"greeting": "bye"}),
        ("ask_name", {}),
        ("ask_name", {**arguments, "extra": True}),
    ):
        reply = await client.call(name, args, responses={key: ADA}, state=state)
        assert_refused(reply, "different request")
    assert fake.answers == []
    assert fake.calls == 1  # none of them reached the upstream either
    done = await client.call("ask_name", arguments, responses={key: ADA}, state=state)
    assert complete_text(done) == "hello Ada"
    assert [a["result"] for a in fake.answers] == [ADA]


async def test_consumed_state_is_refused(client: Client, fake: FakeUpstream) -> None:
    # Mid-call: round one's state is spent once round two has begun.
    requests, state1 = input_required(await client.call("ask_twice"))
    key1 = only_key(requests)
    requests2, state2 = input_required(
        await client.call("ask_twice", responses={key1: ADA}, state=state1)
    )
    key2 = only_key(requests2)
    replay = await client.call("ask_twice", responses={key1: ADA}, state=state1)
    assert_refused(replay, "already used")
    assert [a["result"] for a in fake.answers] == [ADA]
    done = await client.call("ask_twice", responses={key2: BLUE}, state=state2)
    assert complete_text(done) == "hello Ada, blue"
    # After the call: every state of it is spent.
    for state, key, answer in ((state2, key2, BLUE), (state1, key1, ADA)):
        reused = await client.call("ask_twice", responses={key: answer}, state=state)
        assert reused.status == 400, reused.text
        assert reused.error["code"] == -32602, reused.error
    assert [a["result"] for a in fake.answers] == [ADA, BLUE]
    assert fake.calls == 1


async def test_concurrent_retries_with_one_state_resume_once(
    client: Client, fake: FakeUpstream
) -> None:
    requests, state = input_required(await client.call("ask_name"))
    key = only_key(requests)
    replies = await asyncio.gather(
        *(client.call("ask_name", responses={key: ADA}, state=state) for _ in range(4))
    )
    done = [r for r in replies if r.status == 200]
    assert len(done) == 1, [r.text for r in replies]
    assert complete_text(done[0]) == "hello Ada"
    for reply in replies:
        if reply is not done[0]:
            assert reply.status == 400 and reply.error["code"] == -32602, reply.text
    assert [a["result"] for a in fake.answers] == [ADA]


# --------------------------------------------------------------------------- capabilities


async def test_client_without_the_capability_gets_32021_and_the_ask_is_settled(
    client: Client, fake: FakeUpstream
) -> None:
    fake.linger = True
    reply = await client.call("ask_name", caps={})
    assert reply.status == 400, reply.text
    assert reply.error["code"] == -32021, reply.error
    assert "elicitation" in reply.error["message"]
    assert reply.error["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}
    upstream_id = fake.call_ids[0]
    # The upstream's pending request is answered with a refusal, and its call cancelled.
    answers = await fake.wait_answers(1, WAIT)
    assert answers[0]["result"] == {"action": "cancel"}
    await fake.wait_for(lambda: upstream_id in fake.cancelled, WAIT)


async def test_client_with_elicitation_only_cannot_be_sampled(
    client: Client, fake: FakeUpstream
) -> None:
    reply = await client.call("ask_sample", caps=ELICIT_CAPS)
    assert reply.status == 400, reply.text
    assert reply.error["code"] == -32021, reply.error
    assert reply.error["data"]["requiredCapabilities"] == {"sampling": {}}
    answers = await fake.wait_answers(1, WAIT)
    assert "error" in answers[0], answers[0]


# --------------------------------------------------------------------------- legacy client


@pytest.fixture(scope="module")
def modern_gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    # The official TypeScript SDK v2 server, 2025-era traffic rejected: a purely
    # 2026-07-28 upstream (the registry's node-sdk2-server-modern-only is the same).
    server = replace(peer("node-sdk2-server"), extra_args=("--legacy", "reject"))
    require_installed(server)
    with (
        running_server(server, "streamable-http") as upstream,
        gateway(f"/mcp={upstream}", tmp_path=tmp_path_factory.mktemp("gw-modern")) as running,
    ):
        yield running
        assert_clean_log(running.log())


async def open_legacy_session(http: aiohttp.ClientSession, url: str, version: str) -> str:
    hello = initialize(0, version)
    hello["params"]["capabilities"] = {"elicitation": {}}
    reply = await post(http, url, hello)
    assert reply.status == 200, reply.text
    assert reply.result["protocolVersion"] == version, reply.message
    session_id = reply.session_id
    assert session_id
    done = await post(
        http, url, notification("notifications/initialized"), session_headers(session_id, version)
    )
    assert done.status == 202, done.text
    return session_id


@pytest.mark.parametrize(
    ("answer", "expected"),
    # The upstream tool says what it received: the decline must reach it as a decline.
    [(ADA, "hello Ada"), ({"action": "decline"}, "no name (decline)")],
    ids=["accept", "decline"],
)
async def test_legacy_client_gets_a_modern_upstreams_ask_pushed(
    http: aiohttp.ClientSession,
    modern_gw: RunningGateway,
    answer: dict[str, Any],
    expected: str,
) -> None:
    version = "2025-06-18"
    url = modern_gw.url("/mcp")
    session_id = await open_legacy_session(http, url, version)
    headers = session_headers(session_id, version)
    assert headers["Accept"] == base_headers()["Accept"]  # JSON or SSE
    body = request(7, "tools/call", {"name": "ask_name", "arguments": {}})

    async def run() -> dict[str, Any]:
        async with http.post(url, json=body, headers=headers) as response:
            assert response.status == 200
            assert response.content_type == "text/event-stream"
            reader = SseReader(response)
            asked = await reader.next_message()
            assert asked.get("method") == "elicitation/create", asked
            assert "id" in asked
            assert asked["params"]["requestedSchema"]["properties"]["name"]["type"] == "string"
            reply = {"jsonrpc": "2.0", "id": asked["id"], "result": answer}
            accepted = await post(http, url, reply, headers)
            assert accepted.status == 202, accepted.text
            return await reader.response_to(7)

    final = await asyncio.wait_for(run(), WAIT * 2)
    assert "result" in final, final
    assert text_of(final["result"]) == expected, final
    assert "resultType" not in final["result"]  # projected for a 2025-06-18 client
    assert modern_gw.process.poll() is None
