"""Tasks against a real SDK server: the TypeScript SDK 1.32 server (2025-11-25) with
its experimental tasks (`--tasks`: an in-memory task store; `slow_task(ms, word)`
completes after `ms` with the text `slow <word>` unless cancelled first).

- A 2026-07-28 client that declares the `io.modelcontextprotocol/tasks` extension
  gets the SDK's core tasks as extension tasks (`resultType: "task"`, `tasks/get`
  with the result inlined once terminal, `tasks/cancel`).
- A 2025-11-25 client's own experimental tasks pass through to the same server.

Completion is awaited by polling `tasks/get` at the task's own poll interval, as
the protocol has clients do, within a bounded deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from tests.e2e.fake_client import (
    CAPS,
    NEWEST_HANDSHAKE,
    WAIT,
    assert_clean_log,
    modern_headers,
    modern_meta,
    post,
    request,
    session_headers,
    text_of,
)
from tests.e2e.gateway_proc import RunningGateway
from tests.e2e.sdk_peers import SDK1, gateway_before, legacy_session, sdk_peer, who

TASKS_EXT = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {"extensions": {TASKS_EXT: {}}}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    with gateway_before(sdk_peer(SDK1, "--tasks"), tmp_path_factory.mktemp("gw-sdk-tasks")) as gw:
        yield gw
        assert_clean_log(gw.log())


class Modern:
    """A 2026-07-28 client of the tasks extension, as one principal."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url, self.auth, self.ids = http, url, who(), 0

    async def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        body = request(self.ids, method, {**params, "_meta": {**modern_meta(), CAPS: WITH_TASKS}})
        name = params.get("name") if method == "tools/call" else None
        headers = {**modern_headers(method, name), "Authorization": self.auth}
        reply = await post(self.http, self.url, body, headers)
        assert reply.status == 200, reply.text
        return reply.result

    async def until_terminal(self, task_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT
        while True:
            got = await self.result("tasks/get", {"taskId": task_id})
            assert got["taskId"] == task_id, got
            if got["status"] in ("completed", "failed", "cancelled"):
                return got
            assert time.monotonic() < deadline, f"task still {got['status']} after {WAIT}s"
            await asyncio.sleep(got.get("pollIntervalMs", 50) / 1000)  # the protocol's poll


async def test_modern_client_gets_the_sdks_task_as_an_extension_task(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    client = Modern(http, gw.url("/mcp"))
    tools = {t["name"]: t for t in (await client.result("tools/list", {}))["tools"]}
    assert "slow_task" in tools
    created = await client.result(
        "tools/call", {"name": "slow_task", "arguments": {"ms": 300, "word": "hi"}}
    )
    assert created["resultType"] == "task", created
    assert created["status"] == "working", created
    assert "task" not in created  # the extension's flat shape, not the core's
    done = await client.until_terminal(created["taskId"])
    assert done["status"] == "completed", done
    assert text_of(done["result"]) == "slow hi"


async def test_modern_client_cancels_the_sdks_task(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    client = Modern(http, gw.url("/mcp"))
    args = {"ms": 30000, "word": "never"}
    created = await client.result("tools/call", {"name": "slow_task", "arguments": args})
    assert created["resultType"] == "task", created
    ack = await client.result("tasks/cancel", {"taskId": created["taskId"]})
    assert {k: v for k, v in ack.items() if k not in ("resultType", "_meta")} == {}, ack
    after = await client.result("tasks/get", {"taskId": created["taskId"]})
    assert after["status"] == "cancelled", after  # the SDK's own store says so
    assert "result" not in after, after


class Legacy:
    """A 2025-11-25 client that uses experimental tasks itself."""

    def __init__(
        self, http: aiohttp.ClientSession, url: str, session: str, auth: dict[str, str]
    ) -> None:
        self.http, self.url, self.ids = http, url, 0
        self.headers = {**session_headers(session, NEWEST_HANDSHAKE), **auth}

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        reply = await post(self.http, self.url, request(self.ids, method, params), self.headers)
        assert reply.status == 200, reply.text
        return reply.message


async def legacy(http: aiohttp.ClientSession, gw: RunningGateway) -> Legacy:
    url, auth = gw.url("/mcp"), {"Authorization": who()}
    session = await legacy_session(http, url, {"tasks": {"list": {}, "cancel": {}}}, auth)
    return Legacy(http, url, session, auth)


async def test_2025_11_25_client_tasks_pass_through(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    client = await legacy(http, gw)
    params = {
        "name": "slow_task",
        "arguments": {"ms": 300, "word": "there"},
        "task": {"ttl": 60000},
    }
    created = (await client.send("tools/call", params))["result"]
    task = created["task"]
    assert task["status"] == "working", created
    got = (await client.send("tasks/get", {"taskId": task["taskId"]}))["result"]
    assert got["taskId"] == task["taskId"] and got["status"] in ("working", "completed"), got
    # tasks/result waits for the end and gives the tool's own result.
    final = (await client.send("tasks/result", {"taskId": task["taskId"]}))["result"]
    assert text_of(final) == "slow there", final
    listed = (await client.send("tasks/list", {}))["result"]
    assert task["taskId"] in {t["taskId"] for t in listed["tasks"]}, listed


async def test_2025_11_25_client_cancels_a_task(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    client = await legacy(http, gw)
    params = {"name": "slow_task", "arguments": {"ms": 30000, "word": "x"}, "task": {"ttl": 60000}}
    task = (await client.send("tools/call", params))["result"]["task"]
    cancelled = (await client.send("tasks/cancel", {"taskId": task["taskId"]}))["result"]
    assert cancelled["status"] == "cancelled", cancelled
    got = (await client.send("tasks/get", {"taskId": task["taskId"]}))["result"]
    assert got["status"] == "cancelled", got


async def test_without_the_extension_the_call_just_completes(
    http: aiohttp.ClientSession, gw: RunningGateway
) -> None:
    body = request(
        1,
        "tools/call",
        {"name": "slow_task", "arguments": {"ms": 50, "word": "plain"}, "_meta": modern_meta()},
    )
    headers = {**modern_headers("tools/call", "slow_task"), "Authorization": who()}
    reply = await post(http, gw.url("/mcp"), body, headers)
    assert reply.status == 200, reply.text
    assert reply.result["resultType"] == "complete", reply.result
    assert text_of(reply.result) == "slow plain"
