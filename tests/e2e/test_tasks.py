"""Tasks across eras: a 2026-07-28 client of the tasks extension, through the
gateway, to a 2025-11-25 upstream with core tasks (the gateway synthesizes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.e2e.fake_client import modern_headers, modern_meta, post, text_of
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import gateway

CAPS = "io.modelcontextprotocol/clientCapabilities"
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {"extensions": {TASKS: {}}}


def _request(id_: int, method: str, params: dict[str, Any], caps: dict[str, Any]) -> dict[str, Any]:
    meta = {**modern_meta(), CAPS: caps}
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": {**params, "_meta": meta}}


class Client:
    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http = http
        self.url = url
        self.ids = 0

    async def send(
        self, method: str, params: dict[str, Any], caps: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        self.ids += 1
        body = _request(self.ids, method, params, WITH_TASKS if caps is None else caps)
        name = params.get("name") if method == "tools/call" else None
        reply = await post(self.http, self.url, body, modern_headers(method, name))
        return reply.message

    async def result(
        self, method: str, params: dict[str, Any], caps: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        message = await self.send(method, params, caps)
        assert "result" in message, message
        result: dict[str, Any] = message["result"]
        return result


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[FakeUpstream, Client]]:
    upstream = FakeUpstream("tasks")
    url = await upstream.start()
    try:
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                yield upstream, Client(http, gw.url("/mcp"))
            await upstream.stop()
    finally:
        await upstream.stop()


async def test_discovery_advertises_the_tasks_extension(
    setup: tuple[FakeUpstream, Client],
) -> None:
    _, client = setup
    result = await client.result("server/discover", {})
    capabilities = result["capabilities"]
    assert capabilities["extensions"] == {TASKS: {}}
    assert "tasks" not in capabilities


async def test_a_task_is_created_polled_and_completed(
    setup: tuple[FakeUpstream, Client],
) -> None:
    upstream, client = setup
    created = await client.result("tools/call", {"name": "slow", "arguments": {"text": "hi"}})
    assert created["resultType"] == "task", created
    assert created["status"] == "working"
    assert created["statusMessage"] == "on it"
    assert created["ttlMs"] == 60000 and created["pollIntervalMs"] == 250
    assert "ttl" not in created and "pollInterval" not in created and "task" not in created
    assert created["createdAt"] and created["lastUpdatedAt"]
    assert upstream.task_params[-1]["task"] == {}
    task_id = created["taskId"]

    working = await client.result("tasks/get", {"taskId": task_id})
    assert working["resultType"] == "complete"
    assert working["status"] == "working" and working["taskId"] == task_id
    assert "result" not in working and "error" not in working
    assert ("tasks/result", task_id) not in upstream.task_requests

    upstream.finish(task_id)
    done = await client.result("tasks/get", {"taskId": task_id})
    assert done["resultType"] == "complete"
    assert done["status"] == "completed"
    assert done["ttlMs"] == 60000
    assert text_of(done["result"]) == "done: hi"
    assert ("tasks/result", task_id) in upstream.task_requests


async def test_a_tool_error_completes_the_task(setup: tuple[FakeUpstream, Client]) -> None:
    upstream, client = setup
    created = await client.result("tools/call", {"name": "slow", "arguments": {"text": "x"}})
    upstream.finish(created["taskId"], is_error=True)
    done = await client.result("tasks/get", {"taskId": created["taskId"]})
    assert done["status"] == "completed"  # the extension: failed is for JSON-RPC errors
    assert done["result"]["isError"] is True
    assert text_of(done["result"]) == "done: x"


async def test_cancel_is_acknowledged_empty(setup: tuple[FakeUpstream, Client]) -> None:
    upstream, client = setup
    created = await client.result("tools/call", {"name": "slow", "arguments": {"text": "x"}})
    task_id = created["taskId"]
    ack = await client.result("tasks/cancel", {"taskId": task_id})
    assert {k: v for k, v in ack.items() if k not in ("resultType", "_meta")} == {}
    assert ("tasks/cancel", task_id) in upstream.task_requests
    assert upstream.tasks[task_id]["status"] == "cancelled"
    after = await client.result("tasks/get", {"taskId": task_id})
    assert after["status"] == "cancelled"
    assert "result" not in after


async def test_an_unknown_task_is_the_upstream_error(setup: tuple[FakeUpstream, Client]) -> None:
    _, client = setup
    message = await client.send("tasks/get", {"taskId": "nope"})
    assert message["error"]["code"] == -32602, message


async def test_task_only_tools_are_offered_to_declaring_clients(
    setup: tuple[FakeUpstream, Client],
) -> None:
    upstream, client = setup
    plain = await client.result("tools/list", {}, {})
    assert sorted(t["name"] for t in plain["tools"]) == ["confirm", "echo", "slow"]
    declared = await client.result("tools/list", {})
    tools = {t["name"]: t for t in declared["tools"]}
    assert sorted(tools) == ["batch", "confirm", "echo", "slow"]
    assert all("execution" not in tool for tool in tools.values())
    created = await client.result("tools/call", {"name": "batch", "arguments": {"text": "b"}})
    assert created["resultType"] == "task"
    upstream.finish(created["taskId"])
    done = await client.result("tasks/get", {"taskId": created["taskId"]})
    assert text_of(done["result"]) == "done: b"


async def test_without_the_extension_nothing_changes(
    setup: tuple[FakeUpstream, Client],
) -> None:
    upstream, client = setup
    result = await client.result("tools/call", {"name": "slow", "arguments": {"text": "s"}}, {})
    assert result["resultType"] == "complete"
    assert text_of(result) == "echo: s"
    assert "task" not in upstream.task_params[-1]
    # A tool that takes no tasks runs as it always did, even for a declaring client.
    echoed = await client.result("tools/call", {"name": "echo", "arguments": {"text": "e"}})
    assert echoed["resultType"] == "complete"
    assert text_of(echoed) == "echo: e"
    assert "task" not in upstream.task_params[-1]


async def test_input_requests_are_relayed_and_answered_by_update(
    setup: tuple[FakeUpstream, Client],
) -> None:
    upstream, client = setup
    caps = {**WITH_TASKS, "elicitation": {"form": {}}}
    created = await client.result("tools/call", {"name": "confirm", "arguments": {}}, caps)
    assert created["resultType"] == "task"
    assert created["status"] == "input_required"
    task_id = created["taskId"]

    asking = await client.result("tasks/get", {"taskId": task_id}, caps)
    assert asking["status"] == "input_required", asking
    ((key, request),) = asking["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "Go ahead?"
    assert "_meta" not in request["params"]  # the upstream's related-task tag stays upstream
    again = await client.result("tasks/get", {"taskId": task_id}, caps)
    assert again["inputRequests"] == asking["inputRequests"]  # one question, one key

    responses = {key: {"action": "accept", "content": {"ok": True}}}
    ack = await client.result(
        "tasks/update", {"taskId": task_id, "inputResponses": responses}, caps
    )
    assert {k: v for k, v in ack.items() if k not in ("resultType", "_meta")} == {}
    await upstream.wait_for(lambda: upstream.tasks[task_id]["status"] == "completed", 5.0)

    done = await client.result("tasks/get", {"taskId": task_id}, caps)
    assert done["status"] == "completed"
    assert text_of(done["result"]) == "confirmed: True"
    assert "inputRequests" not in done


async def test_an_input_request_the_client_cannot_take_is_refused_upstream(
    setup: tuple[FakeUpstream, Client],
) -> None:
    upstream, client = setup
    created = await client.result("tools/call", {"name": "confirm", "arguments": {}})
    task_id = created["taskId"]
    await client.result("tasks/get", {"taskId": task_id})  # holds the upstream's tasks/result
    await upstream.wait_for(lambda: upstream.tasks[task_id]["status"] == "completed", 5.0)
    done = await client.result("tasks/get", {"taskId": task_id})
    assert done["status"] == "completed"
    assert text_of(done["result"]) == "confirmed: cancel"  # no elicitation declared


async def test_update_of_a_task_awaiting_nothing_is_invalid(
    setup: tuple[FakeUpstream, Client],
) -> None:
    _, client = setup
    created = await client.result("tools/call", {"name": "slow", "arguments": {}})
    message = await client.send("tasks/update", {"taskId": created["taskId"], "inputResponses": {}})
    assert message["error"]["code"] == -32602, message
