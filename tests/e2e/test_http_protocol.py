"""The gateway's inbound HTTP endpoint, end to end, spoken by hand.

One `gateway serve` subprocess in front of one real official-SDK upstream
(node-sdk1-server, 2025-11-25) for the whole module; every test talks raw
HTTP to it with aiohttp so it controls every header and byte.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from peers.registry import peer, require_installed, running_server

from tests.e2e.fake_client import (
    EVENT_STREAM,
    JSON,
    MODERN,
    NEWEST_HANDSHAKE,
    WAIT,
    SseReader,
    assert_clean_log,
    base_headers,
    call_tool_legacy,
    call_tool_modern,
    initialize,
    modern_headers,
    modern_request,
    notification,
    open_session,
    post,
    request,
    session_headers,
    text_of,
)
from tests.e2e.gateway_proc import RunningGateway, gateway

UPSTREAM = "node-sdk1-server"
MAX_BODY = 4 * 1024 * 1024


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    server = peer(UPSTREAM)
    require_installed(server)
    with running_server(server, "streamable-http") as url:
        assert isinstance(url, str)
        yield url


@pytest.fixture(scope="module")
def gw(upstream: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    with gateway(f"/mcp={upstream}", tmp_path=tmp_path_factory.mktemp("gw")) as running:
        yield running
        assert_clean_log(running.log())


@pytest.fixture
def url(gw: RunningGateway) -> Iterator[str]:
    yield gw.url("/mcp")
    assert gw.process.poll() is None, f"the gateway died:\n{gw.log()[-4000:]}"


# --------------------------------------------------------------------------- sessions


def _visible_ascii(value: str) -> bool:
    return all(0x21 <= ord(ch) <= 0x7E for ch in value)


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
async def test_initialize_mints_a_fresh_session_id(
    http: aiohttp.ClientSession, url: str, version: str
) -> None:
    ids = []
    for n in range(2):
        reply = await post(http, url, initialize(n, version))
        assert reply.status == 200, reply.text
        assert reply.message["id"] == n
        assert reply.result["protocolVersion"] == version
        assert reply.result["serverInfo"]["name"]
        session_id = reply.session_id
        assert session_id is not None, dict(reply.headers)
        assert len(session_id) >= 32 and _visible_ascii(session_id), session_id
        ids.append(session_id)
    assert ids[0] != ids[1]


async def test_initialize_with_an_unknown_version_gets_the_newest_counter_offer(
    http: aiohttp.ClientSession, url: str
) -> None:
    reply = await post(http, url, initialize(1, "1999-01-01"))
    assert reply.status == 200, reply.text
    assert reply.result["protocolVersion"] == NEWEST_HANDSHAKE
    assert reply.session_id


async def test_a_session_runs_calls(http: aiohttp.ClientSession, url: str) -> None:
    session_id = await open_session(http, url)
    reply = await call_tool_legacy(http, url, session_id, "echo", {"text": "hi"}, id_=7)
    assert reply.status == 200, reply.text
    assert reply.message["id"] == 7
    assert text_of(reply.result) == "echo: hi"


async def test_a_request_without_the_session_id_is_400(
    http: aiohttp.ClientSession, url: str
) -> None:
    await open_session(http, url)
    headers = base_headers(**{"MCP-Protocol-Version": NEWEST_HANDSHAKE})
    reply = await post(http, url, request(2, "tools/list"), headers)
    assert reply.status == 400, reply.text
    assert reply.error["code"] == -32600


async def test_an_unknown_session_id_is_404(http: aiohttp.ClientSession, url: str) -> None:
    reply = await post(http, url, request(2, "tools/list"), session_headers("no-such-session" * 3))
    assert reply.status == 404, reply.text
    assert "error" in reply.message


async def test_delete_ends_the_session(http: aiohttp.ClientSession, url: str) -> None:
    session_id = await open_session(http, url)
    async with http.delete(url, headers=session_headers(session_id)) as response:
        assert response.status in (200, 204), await response.text()
    reply = await post(http, url, request(3, "tools/list"), session_headers(session_id))
    assert reply.status == 404, reply.text
    async with http.delete(url, headers=session_headers(session_id)) as response:
        assert response.status == 404


async def test_get_with_the_session_opens_its_stream_until_delete(
    http: aiohttp.ClientSession, url: str
) -> None:
    session_id = await open_session(http, url)
    headers = {**session_headers(session_id), "Accept": EVENT_STREAM}
    del headers["Content-Type"]
    async with http.get(url, headers=headers) as stream:
        assert stream.status == 200
        assert stream.content_type == EVENT_STREAM
        # The session still takes requests while its stream is open.
        reply = await call_tool_legacy(http, url, session_id, "echo", {"text": "x"})
        assert text_of(reply.result) == "echo: x"
        async with http.delete(url, headers=session_headers(session_id)) as response:
            assert response.status in (200, 204)
        # Ending the session ends its stream (bounded).
        with pytest.raises(EOFError):
            await SseReader(stream).next(within=WAIT)


async def test_get_with_an_unknown_session_is_404(http: aiohttp.ClientSession, url: str) -> None:
    headers = {"Accept": EVENT_STREAM, "Mcp-Session-Id": "unknown-" * 5}
    async with http.get(url, headers=headers) as response:
        assert response.status == 404


# --------------------------------------------------------------------------- 2026-07-28


async def test_discover(http: aiohttp.ClientSession, url: str) -> None:
    body = modern_request(1, "server/discover")
    reply = await post(http, url, body, modern_headers("server/discover"))
    assert reply.status == 200, reply.text
    assert reply.message["id"] == 1
    result = reply.result
    assert MODERN in result["supportedVersions"]
    assert isinstance(result["capabilities"], dict) and "tools" in result["capabilities"]
    assert result["resultType"] == "complete"
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
    assert result["cacheScope"] in ("private", "public")
    assert reply.session_id is None  # a stateless revision never gets a session


async def test_modern_tool_call(http: aiohttp.ClientSession, url: str) -> None:
    reply = await call_tool_modern(http, url, "echo", {"text": "modern"}, id_="m-1")
    assert reply.status == 200, reply.text
    assert reply.message["id"] == "m-1"
    assert reply.result["resultType"] == "complete"
    assert text_of(reply.result) == "echo: modern"


async def test_missing_meta_is_400_invalid_params(http: aiohttp.ClientSession, url: str) -> None:
    reply = await post(http, url, request(1, "tools/list", {}), modern_headers("tools/list"))
    assert reply.status == 400, reply.text
    assert reply.error["code"] == -32602
    assert reply.message["id"] == 1


async def test_unknown_meta_version_is_400_unsupported(
    http: aiohttp.ClientSession, url: str
) -> None:
    body = modern_request(1, "tools/list", version="2099-01-01")
    reply = await post(http, url, body, modern_headers("tools/list", version="2099-01-01"))
    assert reply.status == 400, reply.text
    assert reply.error["code"] == -32022
    assert MODERN in reply.error["data"]["supported"]
    assert reply.error["data"].get("requested") in (None, "2099-01-01")


def _without(headers: dict[str, str], name: str) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() != name.lower()}


HEADER_CASES: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "no-protocol-version": (
        modern_request(1, "tools/list"),
        _without(modern_headers("tools/list"), "MCP-Protocol-Version"),
    ),
    "protocol-version-mismatch": (
        modern_request(1, "tools/list"),
        {**modern_headers("tools/list"), "MCP-Protocol-Version": "2025-11-25"},
    ),
    "no-method": (
        modern_request(1, "tools/list"),
        _without(modern_headers("tools/list"), "Mcp-Method"),
    ),
    "method-mismatch": (
        modern_request(1, "tools/list"),
        modern_headers("prompts/list"),
    ),
    "no-name": (
        modern_request(1, "tools/call", {"name": "echo", "arguments": {"text": "x"}}),
        modern_headers("tools/call"),
    ),
    "name-mismatch": (
        modern_request(1, "tools/call", {"name": "echo", "arguments": {"text": "x"}}),
        modern_headers("tools/call", "add"),
    ),
}


@pytest.mark.parametrize("case", list(HEADER_CASES))
async def test_header_rules_are_400_header_mismatch(
    http: aiohttp.ClientSession, url: str, case: str
) -> None:
    body, headers = HEADER_CASES[case]
    reply = await post(http, url, body, headers)
    assert reply.status == 400, reply.text
    assert reply.error["code"] == -32020, reply.message


@pytest.mark.parametrize("method", ["no/such-method", "ping", "logging/setLevel"])
async def test_unknown_method_is_404(http: aiohttp.ClientSession, url: str, method: str) -> None:
    params = {"level": "info"} if method == "logging/setLevel" else {}
    reply = await post(http, url, modern_request(5, method, params), modern_headers(method))
    assert reply.status == 404, reply.text
    assert reply.error["code"] == -32601
    assert reply.message["id"] == 5


@pytest.mark.parametrize("verb", ["GET", "DELETE"])
async def test_get_and_delete_are_405_for_the_modern_revision(
    http: aiohttp.ClientSession, url: str, verb: str
) -> None:
    headers = {"Accept": EVENT_STREAM, "MCP-Protocol-Version": MODERN}
    async with http.request(verb, url, headers=headers) as response:
        assert response.status == 405, await response.text()


# --------------------------------------------------------------------------- batches


async def test_a_2025_03_26_batch_gets_an_array_of_answers(
    http: aiohttp.ClientSession, url: str
) -> None:
    session_id = await open_session(http, url, "2025-03-26")
    batch = [
        request("a", "tools/call", {"name": "echo", "arguments": {"text": "in a batch"}}),
        notification("notifications/roots/list_changed"),
        request(7, "tools/list"),
    ]
    reply = await post(http, url, batch, session_headers(session_id, "2025-03-26"))
    assert reply.status == 200, reply.text
    assert len(reply.messages) == 1 and isinstance(reply.messages[0], list), reply.text
    answers = {answer["id"]: answer for answer in reply.messages[0]}
    assert set(answers) == {"a", 7}, reply.text
    assert text_of(answers["a"]["result"]) == "echo: in a batch"
    assert "echo" in {tool["name"] for tool in answers[7]["result"]["tools"]}


async def test_a_batch_is_refused_on_2025_06_18(http: aiohttp.ClientSession, url: str) -> None:
    session_id = await open_session(http, url, "2025-06-18")
    batch = [request(1, "tools/list"), request(2, "tools/list")]
    reply = await post(http, url, batch, session_headers(session_id, "2025-06-18"))
    assert reply.status == 400, reply.text
    messages = reply.messages[0] if isinstance(reply.messages[0], list) else reply.messages
    assert messages and all("error" in m and "result" not in m for m in messages), reply.text
    assert messages[0]["error"]["code"] == -32600


@pytest.mark.parametrize("with_session", [True, False], ids=["in-session", "no-session"])
async def test_initialize_inside_a_batch_is_refused(
    http: aiohttp.ClientSession, url: str, with_session: bool
) -> None:
    headers = base_headers()
    if with_session:
        headers = session_headers(await open_session(http, url, "2025-03-26"), "2025-03-26")
    batch = [initialize(1, "2025-03-26"), request(2, "tools/list")]
    reply = await post(http, url, batch, headers)
    assert reply.messages, reply.text
    messages = reply.messages[0] if isinstance(reply.messages[0], list) else reply.messages
    assert not any("result" in m for m in messages), reply.text
    assert any(m.get("error", {}).get("code") == -32600 for m in messages), reply.text
    if not with_session:
        assert reply.session_id is None


# --------------------------------------------------------------------------- malformed input


async def test_malformed_json_is_a_parse_error(http: aiohttp.ClientSession, url: str) -> None:
    reply = await post(http, url, None, raw=b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert reply.status == 400, reply.text
    assert reply.error["code"] == -32700
    assert reply.message["id"] is None


@pytest.mark.parametrize(
    "body",
    [
        42,
        "a string",
        [1, 2],
        {"jsonrpc": "1.0", "id": 1, "method": "tools/list"},
        {"id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "method": 12},
    ],
    ids=["number", "string", "array-of-numbers", "jsonrpc-1.0", "no-jsonrpc", "method-number"],
)
async def test_an_invalid_message_is_invalid_request(
    http: aiohttp.ClientSession, url: str, body: Any
) -> None:
    session_id = await open_session(http, url, "2025-03-26")
    reply = await post(http, url, body, session_headers(session_id, "2025-03-26"))
    assert reply.status == 400, reply.text
    assert reply.error["code"] == -32600, reply.text


async def test_a_body_over_the_limit_is_413(http: aiohttp.ClientSession, url: str) -> None:
    padding = "x" * MAX_BODY
    body = json.dumps(initialize(1) | {"padding": padding}).encode()
    assert len(body) > MAX_BODY
    try:
        reply = await post(http, url, None, raw=body)
    except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as exc:
        pytest.fail(f"the gateway dropped the connection instead of answering 413: {exc!r}")
    assert reply.status == 413, reply.text


async def test_a_chunked_body_over_the_limit_is_413(http: aiohttp.ClientSession, url: str) -> None:
    chunk = b"x" * (256 * 1024)

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"p": "'
        for _ in range(MAX_BODY // len(chunk) + 1):
            yield chunk
        yield b'"}}'

    async def run() -> int:
        async with http.post(url, data=chunks(), headers=base_headers()) as response:
            await response.read()
            return response.status

    try:
        status = await asyncio.wait_for(run(), WAIT)
    except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as exc:
        pytest.fail(f"the gateway dropped the connection instead of answering 413: {exc!r}")
    assert status == 413


async def test_a_body_at_the_limit_is_read(http: aiohttp.ClientSession, url: str) -> None:
    # Just under the limit: the gateway reads it and answers normally.
    message = initialize(1)
    skeleton = json.dumps(message | {"padding": ""}).encode()
    body = json.dumps(message | {"padding": "x" * (MAX_BODY - len(skeleton))}).encode()
    assert len(body) == MAX_BODY
    reply = await post(http, url, None, raw=body)
    assert reply.status == 200, reply.text[:500]
    assert reply.result["protocolVersion"] == NEWEST_HANDSHAKE


async def test_a_large_call_arrives_whole(http: aiohttp.ClientSession, url: str) -> None:
    # Far more than one socket read: the body must be read to its end, not to the
    # first chunk that happened to arrive.
    text = "large " * 100_000
    reply = await call_tool_modern(http, url, "echo", {"text": text})
    assert reply.status == 200, reply.text[:500]
    assert text_of(reply.result) == f"echo: {text}"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
async def test_a_wrong_content_type_is_415(
    http: aiohttp.ClientSession, url: str, content_type: str
) -> None:
    headers = {**base_headers(), "Content-Type": content_type}
    reply = await post(http, url, initialize(1), headers)
    assert reply.status == 415, reply.text


@pytest.mark.parametrize("accept", [JSON, EVENT_STREAM, "text/html"])
async def test_an_accept_without_both_types_is_406(
    http: aiohttp.ClientSession, url: str, accept: str
) -> None:
    headers = {**base_headers(), "Accept": accept}
    reply = await post(http, url, initialize(1), headers)
    assert reply.status == 406, reply.text


async def test_modern_accept_rules_apply_too(http: aiohttp.ClientSession, url: str) -> None:
    headers = {**modern_headers("server/discover"), "Accept": JSON}
    reply = await post(http, url, modern_request(1, "server/discover"), headers)
    assert reply.status == 406, reply.text


# --------------------------------------------------------------------------- DNS rebinding


async def test_a_foreign_host_is_403(http: aiohttp.ClientSession, url: str) -> None:
    headers = {**base_headers(), "Host": "evil.example"}
    reply = await post(http, url, initialize(1), headers)
    assert reply.status == 403, reply.text
    async with http.get(url, headers={"Host": "evil.example", "Accept": EVENT_STREAM}) as r:
        assert r.status == 403


@pytest.mark.parametrize("origin", ["http://evil.example", "https://evil.example:8443", "null"])
async def test_a_foreign_origin_is_403(http: aiohttp.ClientSession, url: str, origin: str) -> None:
    headers = {**base_headers(), "Origin": origin}
    reply = await post(http, url, initialize(1), headers)
    assert reply.status == 403, reply.text
    body = modern_request(1, "server/discover")
    reply = await post(http, url, body, {**modern_headers("server/discover"), "Origin": origin})
    assert reply.status == 403, reply.text


@pytest.mark.parametrize(
    "origin", ["http://localhost:1234", "http://127.0.0.1:9", "http://[::1]:8080"]
)
async def test_a_loopback_origin_is_accepted(
    http: aiohttp.ClientSession, url: str, origin: str
) -> None:
    headers = {**base_headers(), "Origin": origin, "Host": "localhost:1234"}
    reply = await post(http, url, initialize(1), headers)
    assert reply.status == 200, reply.text
    assert reply.result["protocolVersion"] == NEWEST_HANDSHAKE


# --------------------------------------------------------------------------- HTTP+SSE


async def test_the_old_http_sse_transport(http: aiohttp.ClientSession, gw: RunningGateway) -> None:
    url = gw.url("/mcp")
    async with http.get(url, headers={"Accept": EVENT_STREAM}) as stream:
        assert stream.status == 200
        assert stream.content_type == EVENT_STREAM
        reader = SseReader(stream)
        first = await reader.next()
        assert first.event == "endpoint", first
        assert first.data.startswith("/mcp?"), first.data
        endpoint = gw.base + first.data
        headers = {"Content-Type": JSON}

        async def send(message: dict[str, Any]) -> None:
            async with http.post(endpoint, data=json.dumps(message), headers=headers) as response:
                assert response.status == 202, await response.text()

        await send(initialize(1, "2024-11-05"))
        answer = await reader.next_message()
        assert answer["id"] == 1, answer
        assert answer["result"]["protocolVersion"] == "2024-11-05"
        assert answer["result"]["serverInfo"]["name"]
        await send(notification("notifications/initialized"))
        await send(request(2, "tools/list"))
        answer = await reader.next_message()
        assert answer["id"] == 2, answer
        tools = {tool["name"]: tool for tool in answer["result"]["tools"]}
        assert "echo" in tools
        assert "outputSchema" not in tools["add"]  # projected down to 2024-11-05
        await send(request("c", "tools/call", {"name": "echo", "arguments": {"text": "old"}}))
        answer = await reader.next_message()
        assert answer["id"] == "c"
        assert text_of(answer["result"]) == "echo: old"


async def test_http_sse_post_with_an_unknown_session_is_404(
    http: aiohttp.ClientSession, url: str
) -> None:
    async with http.post(
        url + "?sessionId=nope", data=json.dumps(initialize(1)), headers={"Content-Type": JSON}
    ) as response:
        assert response.status == 404


# --------------------------------------------------------------------------- request ids


async def test_concurrent_legacy_clients_with_the_same_id(
    http: aiohttp.ClientSession, url: str
) -> None:
    sessions = await asyncio.gather(*(open_session(http, url) for _ in range(6)))
    replies = await asyncio.gather(
        *(
            call_tool_legacy(http, url, sid, "echo", {"text": f"client {n}"}, id_=1)
            for n, sid in enumerate(sessions)
        )
    )
    for n, reply in enumerate(replies):
        assert reply.status == 200, reply.text
        assert reply.message["id"] == 1
        assert text_of(reply.result) == f"echo: client {n}"


async def test_concurrent_overlapping_calls_with_the_same_id(
    http: aiohttp.ClientSession, url: str
) -> None:
    """Slow calls (the progress tool) overlap upstream; every client still gets its own."""
    sessions = await asyncio.gather(*(open_session(http, url) for _ in range(3)))
    legacy = [
        call_tool_legacy(http, url, sid, "progress", {"steps": n + 2}, id_=1)
        for n, sid in enumerate(sessions)
    ]
    modern = [call_tool_modern(http, url, "progress", {"steps": n + 2}, id_=1) for n in range(3, 6)]
    replies = await asyncio.gather(*legacy, *modern)
    for n, reply in enumerate(replies):
        assert reply.status == 200, reply.text
        assert reply.message["id"] == 1
        assert text_of(reply.result) == f"done {n + 2}", reply.text


async def test_concurrent_modern_clients_with_the_same_id(
    http: aiohttp.ClientSession, url: str
) -> None:
    replies = await asyncio.gather(
        *(call_tool_modern(http, url, "echo", {"text": f"m{n}"}, id_=1) for n in range(6))
    )
    for n, reply in enumerate(replies):
        assert reply.status == 200, reply.text
        assert reply.message["id"] == 1
        assert text_of(reply.result) == f"echo: m{n}"


# ------------------------------------------------------------ resumable streams


def _raw_events(text: str) -> list[dict[str, str]]:
    """Every SSE block as its fields (priming events included)."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            name, sep, value = line.partition(":")
            if sep and name:
                fields[name] = fields.get(name, "") + value.removeprefix(" ")
        if fields:
            out.append(fields)
    return out


async def test_a_2025_11_25_call_streams_resumably(http: aiohttp.ClientSession, url: str) -> None:
    """SEP-1699: the call's SSE stream opens with a priming event (an id, empty data, a
    retry delay), every event has an id, and a GET with `Last-Event-ID` replays what
    that stream sent after it."""
    session_id = await open_session(http, url, "2025-11-25")
    reply = await call_tool_legacy(http, url, session_id, "echo", {"text": "r"})
    assert reply.content_type == EVENT_STREAM, reply.text
    events = _raw_events(reply.text)
    priming, *rest = events
    assert priming["data"] == "" and priming["id"] and int(priming["retry"]) > 0
    assert all(e.get("id") for e in rest)
    assert text_of(reply.result) == "echo: r"
    headers = {**session_headers(session_id, "2025-11-25"), "Accept": EVENT_STREAM}
    del headers["Content-Type"]
    async with http.get(url, headers={**headers, "Last-Event-ID": priming["id"]}) as again:
        assert again.status == 200 and again.content_type == EVENT_STREAM
        replayed = _raw_events(await asyncio.wait_for(again.text(), WAIT))
    assert replayed == rest
    async with http.get(url, headers={**headers, "Last-Event-ID": rest[-1]["id"]}) as done:
        assert _raw_events(await asyncio.wait_for(done.text(), WAIT)) == []


@pytest.mark.parametrize(("version", "primed"), [("2025-06-18", False), ("2025-11-25", True)])
async def test_the_standalone_stream_has_ids_and_primes_where_the_revision_does(
    http: aiohttp.ClientSession, url: str, version: str, primed: bool
) -> None:
    session_id = await open_session(http, url, version)
    headers = {**session_headers(session_id, version), "Accept": EVENT_STREAM}
    del headers["Content-Type"]
    async with http.get(url, headers=headers) as stream:
        assert stream.status == 200
        if primed:
            first = (await asyncio.wait_for(stream.content.readuntil(b"\n\n"), WAIT)).decode()
            assert "id: " in first and "retry: " in first and first.endswith("data:\n\n")
        async with http.delete(url, headers=session_headers(session_id, version)) as response:
            assert response.status in (200, 204)
        rest = (await asyncio.wait_for(stream.content.read(), WAIT)).decode()
        assert "retry:" not in rest  # nothing else was sent; a 2025-06-18 stream is not primed
