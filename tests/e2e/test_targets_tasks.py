"""A stateless upstream's own tasks behind several targets (issue 40's pinning, end to
end): a task lives on the target that made it, so every ``tasks/get`` and
``tasks/cancel`` of it goes there, however the route's other calls are spread.

Real processes: `gateway serve --route /mcp=A,also=B`; A and B are two 2026-07-28
servers with the tasks extension (tests/e2e/fake_stateless_tasks.py), each knowing
only its own tasks, as two replicas of a server without a shared store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from tests.e2e.fake_client import modern_headers, modern_meta, post, text_of
from tests.e2e.fake_stateless_tasks import TASKS, StatelessTaskServer
from tests.e2e.gateway_proc import HeldPort, gateway

CAPS = "io.modelcontextprotocol/clientCapabilities"
POLLS = 6  # per task: with calls spread over two targets, unpinned polls would stray


async def _send(http: aiohttp.ClientSession, url: str, id_: int, method: str, params: Any) -> Any:
    meta = {**modern_meta(), CAPS: {"extensions": {TASKS: {}}}}
    body = {"jsonrpc": "2.0", "id": id_, "method": method, "params": {**params, "_meta": meta}}
    name = params.get("name") if method == "tools/call" else None
    reply = await post(http, url, body, modern_headers(method, name))
    assert "result" in reply.message, reply.message
    return reply.message["result"]


async def test_each_task_is_polled_and_cancelled_on_the_target_that_made_it(
    tmp_path: Path,
) -> None:
    servers = [StatelessTaskServer(), StatelessTaskServer()]
    ports = [HeldPort(), HeldPort()]
    urls = [await s.start(p.port) for s, p in zip(servers, ports, strict=True)]
    try:
        route = f"/mcp={urls[0]},also={urls[1]},health_every=5"
        with gateway(route, tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                await _round(http, gw.url("/mcp"), servers)
    finally:
        for server in servers:
            await server.stop()


async def _round(http: aiohttp.ClientSession, url: str, servers: list[StatelessTaskServer]) -> None:
    ids = iter(range(1, 1000))
    created = [
        await _send(http, url, next(ids), "tools/call", {"name": "slow", "arguments": {"word": w}})
        for w in ("one", "two", "three", "four")
    ]
    assert all(c["resultType"] == "task" and c["status"] == "working" for c in created), created
    makers = {s.name for s in servers for c in created if c["taskId"] in s.tasks}
    assert makers == {s.name for s in servers}, "calls were not spread over both targets"
    # Each task polled several times in a row: spread calls alternate between the
    # targets, so an unpinned poll would reach the other one at the second poll.
    for task in created:
        for _ in range(POLLS):
            got = await _send(http, url, next(ids), "tasks/get", {"taskId": task["taskId"]})
            assert got["status"] == "working", got
    owner = {c["taskId"]: next(s for s in servers if c["taskId"] in s.tasks) for c in created}
    first, *rest = created
    owner[first["taskId"]].finish(first["taskId"])
    done = await _send(http, url, next(ids), "tasks/get", {"taskId": first["taskId"]})
    assert done["status"] == "completed" and text_of(done["result"]) == "one", done
    for task in rest:
        await _send(http, url, next(ids), "tasks/cancel", {"taskId": task["taskId"]})
        assert owner[task["taskId"]].tasks[task["taskId"]]["status"] == "cancelled"
    # Every poll and cancel reached a server that knew the task: none was refused.
    assert sum(s.seen["tasks/get"] for s in servers) == POLLS * 4 + 1
