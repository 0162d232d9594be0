"""Finding 1 and 9: a session id (or a requestState) never stands in for credentials.

A session belongs to the principal that created it (a keyed digest of its
Authorization and tenant headers); anyone else naming it, on a request, a GET
stream or a DELETE, is answered exactly as for an unknown session: 404.
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from tests.e2e.fake_client import (
    EVENT_STREAM,
    call_tool_legacy,
    call_tool_modern,
    modern_headers,
    modern_request,
    open_session,
    parse_sse,
    post,
    request,
    session_headers,
    text_of,
)
from tests.security.harness import gateway

ALICE = {"Authorization": "Bearer alice-token"}
MALLORY = {"Authorization": "Bearer mallory-token"}
OTHER_TENANT = {**ALICE, "X-Tenant": "other"}


@pytest.mark.parametrize("intruder", [MALLORY, {}, OTHER_TENANT], ids=["other", "none", "tenant"])
async def test_a_session_id_alone_gets_404_on_request_get_and_delete(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str, intruder: dict[str, str]
) -> None:
    with gateway(tmp_path, upstream, route={"forward_headers": ["x-tenant"]}) as gw:
        url = gw.url()
        owner = {**ALICE, "X-Tenant": "acme"}
        sid = await open_session(http, url, headers=owner)
        stolen = {**session_headers(sid), **intruder}
        if intruder is OTHER_TENANT:
            stolen["X-Tenant"] = "other"
        # A request on the stolen session.
        body = request(7, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
        reply = await post(http, url, body, stolen)
        assert reply.status == 404, reply.text
        # Its standalone stream.
        async with http.get(url, headers={**stolen, "Accept": EVENT_STREAM}) as resp:
            assert resp.status == 404
        # Ending it.
        async with http.delete(url, headers=stolen) as resp:
            assert resp.status == 404
        # Answered as an unknown session is: no hint that it exists.
        unknown = {**session_headers("no-such-session"), **intruder}
        reply_unknown = await post(http, url, body, unknown)
        assert (reply_unknown.status, reply_unknown.error["code"]) == (
            reply.status,
            reply.error["code"],
        )
        # The owner's session is untouched.
        ok = await post(http, url, body, {**session_headers(sid), **owner})
        assert text_of(ok.result) == "x"


async def test_a_legacy_sse_session_is_its_creators(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str
) -> None:
    """HTTP+SSE: the session id in the POST URL is no credential either."""
    with gateway(tmp_path, upstream) as gw:
        url = gw.url()
        async with http.get(url, headers={**ALICE, "Accept": EVENT_STREAM}) as stream:
            assert stream.status == 200
            first = await stream.content.readuntil(b"\n\n")
            endpoint = parse_sse(first.decode())[0].data
            assert "sessionId=" in endpoint
            target = gw.base + endpoint
            body = request(1, "ping")
            for intruder in (MALLORY, {}):
                reply = await post(
                    http, target, body, {"Content-Type": "application/json", **intruder}
                )
                assert reply.status == 404, reply.text
            mine = await post(http, target, body, {"Content-Type": "application/json", **ALICE})
            assert mine.status == 202


async def test_a_request_state_is_its_principals(
    http: aiohttp.ClientSession, tmp_path: Path, upstream: str
) -> None:
    """A stateless client's parked call cannot be resumed by anyone else."""
    with gateway(tmp_path, upstream) as gw:
        url = gw.url()
        asked = await _greet(http, url, ALICE)
        state, key = asked["requestState"], next(iter(asked["inputRequests"]))
        answer = {key: {"action": "accept", "content": {"name": "Mallory"}}}
        for intruder in (MALLORY, {}):
            stolen = await _retry(http, url, intruder, state, answer)
            assert "error" in stolen.message, stolen.message
        mine = await _retry(
            http, url, ALICE, state, {key: {"action": "accept", "content": {"name": "Alice"}}}
        )
        assert text_of(mine.result) == "Hello, Alice!"


async def _greet(http: aiohttp.ClientSession, url: str, who: dict[str, str]) -> dict[str, object]:
    body = modern_request(1, "tools/call", {"name": "greet_me", "arguments": {}})
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {"elicitation": {}}
    reply = await post(http, url, body, {**modern_headers("tools/call", "greet_me"), **who})
    result = reply.result
    assert result["resultType"] == "input_required", result
    return result


async def _retry(
    http: aiohttp.ClientSession,
    url: str,
    who: dict[str, str],
    state: object,
    answers: dict[str, object],
):  # type: ignore[no-untyped-def]
    params = {"name": "greet_me", "arguments": {}, "requestState": state, "inputResponses": answers}
    body = modern_request(2, "tools/call", params)
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {"elicitation": {}}
    return await post(http, url, body, {**modern_headers("tools/call", "greet_me"), **who})


__all__ = ["call_tool_legacy", "call_tool_modern"]
