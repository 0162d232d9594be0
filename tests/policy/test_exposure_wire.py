"""Exposure on every other path a name travels, spoken on the wire by hand in front of
`@modelcontextprotocol/server-everything` (behind a recording hop): 2026-07-28
``Mcp-Name`` headers, prompts, resource reads, subscriptions and listens, completion
references, tasks and calls that would park; and list changes, still forwarded while
the lists they announce stay filtered.  None of what is refused reaches the server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from peers.thirdparty import SERVER_EVERYTHING, running_thirdparty
from peers.thirdparty import require_installed as require_thirdparty

from tests.e2e.fake_client import (
    CAPS,
    EVENT_STREAM,
    WAIT,
    Reply,
    SseReader,
    modern_headers,
    modern_request,
    open_session,
    post,
    request,
    session_headers,
)
from tests.e2e.gateway_proc import RunningGateway, gateway
from tests.policy.recorder import Recorder, recording

pytestmark = pytest.mark.interop

HIDDEN_DOC = "demo://resource/static/document/features.md"
SESSION_RESOURCES = "demo://resource/session/*"
RULES = (
    "tools=allow:get-*|gzip-*",
    "prompts=deny:args-prompt",
    f"resources=deny:{HIDDEN_DOC}|demo://resource/dynamic/blob/*|{SESSION_RESOURCES}",
)
GZIP_ARGS = {
    "name": "policy.txt.gz",
    "data": "data:text/plain;base64,aGVsbG8=",
    "outputType": "resource",
}
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


@dataclass
class Setup:
    gateway: RunningGateway
    recorder: Recorder

    @property
    def url(self) -> str:
        return self.gateway.url("/mcp")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    require_thirdparty(SERVER_EVERYTHING)
    with ExitStack() as stack:
        url = stack.enter_context(running_thirdparty(SERVER_EVERYTHING, "streamable-http"))
        assert isinstance(url, str)
        recorder = stack.enter_context(recording(url.removesuffix("/mcp")))
        route = f"/mcp={recorder.url}/mcp,timeout=20," + ",".join(RULES)
        gw = stack.enter_context(gateway(route, tmp_path=tmp_path_factory.mktemp("gw")))
        yield Setup(gw, recorder)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def modern(
    method: str, params: dict[str, Any], name: str | None = None, caps: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    body = modern_request(7, method, params)
    if caps is not None:
        body["params"]["_meta"][CAPS] = caps
    return body, modern_headers(method, name)


async def modern_post(
    http: aiohttp.ClientSession,
    setup: Setup,
    method: str,
    params: dict[str, Any],
    name: str | None = None,
    caps: dict[str, Any] | None = None,
) -> Reply:
    body, headers = modern(method, params, name, caps)
    return await post(http, setup.url, body, headers)


def assert_error(reply: Reply, status: int, code: int, message: str) -> dict[str, Any]:
    assert reply.status == status, reply.text
    error = reply.error
    assert (error["code"], error["message"]) == (code, message), error
    return error


async def test_a_stateless_client_is_refused_hidden_names_in_its_revisions_way(
    setup: Setup, http: aiohttp.ClientSession
) -> None:
    reply = await modern_post(http, setup, "tools/call", {"name": "echo", "arguments": {}}, "echo")
    assert_error(reply, 400, -32602, "Unknown tool: echo")
    reply = await modern_post(http, setup, "prompts/get", {"name": "args-prompt"}, "args-prompt")
    assert_error(reply, 400, -32602, "Unknown prompt: args-prompt")
    reply = await modern_post(http, setup, "resources/read", {"uri": HIDDEN_DOC}, HIDDEN_DOC)
    error = assert_error(reply, 400, -32602, "Resource not found")
    assert error["data"] == {"uri": HIDDEN_DOC}
    ref = {
        "ref": {"type": "ref/prompt", "name": "args-prompt"},
        "argument": {"name": "city", "value": "a"},
    }
    reply = await modern_post(http, setup, "completion/complete", ref)
    assert_error(reply, 400, -32602, "Unknown prompt: args-prompt")
    listen = {"notifications": {"resourceSubscriptions": [HIDDEN_DOC]}}
    reply = await modern_post(http, setup, "subscriptions/listen", listen)
    assert_error(reply, 400, -32602, "Resource not found")
    # The exposed ones still work, through the same route.
    reply = await modern_post(
        http, setup, "tools/call", {"name": "get-sum", "arguments": {"a": 2, "b": 3}}, "get-sum"
    )
    assert reply.status == 200 and "5" in str(reply.result["content"]), reply.text
    assert setup.recorder.calls("tools/call").count("get-sum") >= 1
    assert "echo" not in setup.recorder.calls("tools/call")
    assert "args-prompt" not in setup.recorder.calls("prompts/get")
    assert HIDDEN_DOC not in setup.recorder.calls("resources/read")
    assert not setup.recorder.calls("completion/complete")


async def test_the_mcp_name_header_cannot_smuggle_a_hidden_tool(
    setup: Setup, http: aiohttp.ClientSession
) -> None:
    """Header and body must agree before any policy looks (-32020): an exposed name in
    Mcp-Name never lets the body's hidden tool through, nor the other way round."""
    for body_name, header in (("echo", "get-sum"), ("get-sum", "echo")):
        params = {"name": body_name, "arguments": {"a": 1, "b": 1}}
        reply = await modern_post(http, setup, "tools/call", params, header)
        assert reply.status == 400, reply.text
        assert reply.error["code"] == -32020, reply.error
    assert "echo" not in setup.recorder.calls("tools/call")


async def test_no_task_and_no_parked_call_of_a_hidden_tool(
    setup: Setup, http: aiohttp.ClientSession
) -> None:
    # A stateless client that runs tasks, and one that answers elicitation (a call that
    # asks would be parked): refused before either can exist.
    caps = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {}}
    for tool in ("trigger-long-running-operation", "trigger-elicitation-request"):
        reply = await modern_post(
            http, setup, "tools/call", {"name": tool, "arguments": {}}, tool, caps
        )
        assert_error(reply, 400, -32602, f"Unknown tool: {tool}")
    # A 2025-11-25 client asking for a task outright.
    session = await open_session(http, setup.url, "2025-11-25")
    body = request(
        8,
        "tools/call",
        {"name": "trigger-long-running-operation", "arguments": {}, "task": {"ttl": 60000}},
    )
    reply = await post(http, setup.url, body, session_headers(session, "2025-11-25"))
    assert_error(reply, 200, -32602, "Unknown tool: trigger-long-running-operation")
    called = setup.recorder.calls("tools/call")
    assert not [name for name in called if name.startswith("trigger-")]
    metrics = await (await http.get(setup.gateway.url("/metrics"))).text()
    assert 'gateway_parked_calls{route="/mcp"} 0.0' in metrics
    assert 'gateway_policy_refusals_total{reason="hidden",route="/mcp"}' in metrics


async def test_a_session_client_gets_resource_not_found_for_hidden_uris(
    setup: Setup, http: aiohttp.ClientSession
) -> None:
    session = await open_session(http, setup.url, "2025-06-18")
    headers = session_headers(session, "2025-06-18")
    for id_, method in enumerate(
        ("resources/read", "resources/subscribe", "resources/unsubscribe")
    ):
        reply = await post(http, setup.url, request(id_, method, {"uri": HIDDEN_DOC}), headers)
        error = assert_error(reply, 200, -32002, "Resource not found")
        assert error["data"] == {"uri": HIDDEN_DOC}
        assert HIDDEN_DOC not in setup.recorder.calls(method)
    template = {"type": "ref/resource", "uri": "demo://resource/dynamic/blob/{resourceId}"}
    body = request(
        9,
        "completion/complete",
        {"ref": template, "argument": {"name": "resourceId", "value": "1"}},
    )
    reply = await post(http, setup.url, body, headers)
    assert_error(reply, 200, -32602, "Unknown resource: demo://resource/dynamic/blob/{resourceId}")


async def test_list_changes_are_forwarded_and_the_lists_stay_filtered(
    setup: Setup, http: aiohttp.ClientSession
) -> None:
    """server-everything's gzip tool registers a session resource and says the list
    changed: the notification reaches the client's stream; the list it then reads
    holds everything of the server's but what the rules hide (the new one too)."""
    session = await open_session(http, setup.url, "2025-06-18")
    headers = session_headers(session, "2025-06-18")
    stream_headers = {**headers, "Accept": EVENT_STREAM}
    async with http.get(setup.url, headers=stream_headers) as stream:
        assert stream.status == 200
        reader = SseReader(stream)
        reply = await post(
            http,
            setup.url,
            request(1, "tools/call", {"name": "gzip-file-as-resource", "arguments": GZIP_ARGS}),
            headers,
        )
        created = reply.result["content"][0]["resource"]["uri"]
        assert created.startswith("demo://resource/session/"), reply.result

        async def list_changed() -> dict[str, Any]:
            while True:
                message = await reader.next_message()
                if message.get("method") == "notifications/resources/list_changed":
                    return message

        await asyncio.wait_for(list_changed(), WAIT)
    reply = await post(http, setup.url, request(2, "resources/list", {}), headers)
    uris = [r["uri"] for r in reply.result["resources"]]
    assert created not in uris and HIDDEN_DOC not in uris
    assert uris and all(u.startswith("demo://resource/static/document/") for u in uris), uris
    reply = await post(http, setup.url, request(3, "resources/read", {"uri": created}), headers)
    assert_error(reply, 200, -32002, "Resource not found")
