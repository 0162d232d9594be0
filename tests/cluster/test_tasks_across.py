"""Tasks across replicas (issue 41, item 4): a 2026-07-28 client's task, run by one
replica as its upstream's core task, is reached from any replica; its id names the
replica (``gwtask.<replica>.<upstream id>``) and `tasks/*` are relayed there; another
principal cannot reach it; once that replica has stopped, its task is said to have
ended, clearly, by the replica the client asks.

Real processes: redis-server, three `gateway serve --cluster` replicas, and a fake
2025-11-25 server with core tasks (``tests.e2e.fake_upstreams tasks``) whose task
stays `working`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from tests.cluster.client import post_json
from tests.cluster.conftest import (
    Cluster,
    _process,
    program,
    replicas_behind_nginx,
    stop,
    wait_port,
)
from tests.e2e.fake_client import modern_headers, modern_meta
from tests.e2e.gateway_proc import REPO, free_port

pytestmark = pytest.mark.timeout(300)

CAPS = "io.modelcontextprotocol/clientCapabilities"
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    redis_server, nginx = program("redis-server"), program("nginx")
    tmp = tmp_path_factory.mktemp("tasks-across")
    redis_port, lb_port = free_port(), free_port()
    redis_argv = [redis_server, "--port", str(redis_port), "--bind", "127.0.0.1"]
    redis_argv += ["--save", "", "--appendonly", "no", "--dir", str(tmp)]
    fake = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.fake_upstreams", "tasks"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert fake.stdout is not None
        upstream = fake.stdout.readline().decode().split()[1]
        with _process(redis_argv, tmp / "redis.log") as redis:
            wait_port(redis_port, 10.0, redis)
            found = Cluster(tmp, f"redis://127.0.0.1:{redis_port}/0", upstream, lb_port)
            with replicas_behind_nginx(found, nginx):
                yield found
    finally:
        stop(fake)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def send(
    http: aiohttp.ClientSession, base: str, method: str, params: dict[str, Any], who: str
) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {**params, "_meta": {**modern_meta(), CAPS: TASKS}},
    }
    name = params.get("name") if method == "tools/call" else None
    headers = {**modern_headers(method, name), "Authorization": f"Bearer {who}"}
    status, message, _ = await post_json(http, base + "/mcp", body, headers)
    assert status in (200, 400), message
    result: dict[str, Any] = message
    return result


async def test_a_task_is_reached_from_every_replica_and_ends_clearly_with_its_own(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    first, *others = cluster.replicas
    created = await send(http, first.base, "tools/call", {"name": "slow", "arguments": {}}, "ada")
    task_id = created["result"]["taskId"]
    assert task_id.startswith("gwtask.") and task_id.count(".") >= 2, task_id
    for replica in cluster.replicas:  # straight to each: the others relay to the first
        got = await send(http, replica.base, "tasks/get", {"taskId": task_id}, "ada")
        assert got["result"]["status"] == "working", got
        assert got["result"]["taskId"] == task_id
    stranger = await send(http, others[0].base, "tasks/get", {"taskId": task_id}, "eve")
    assert "error" in stranger and "no such task" in stranger["error"]["message"], stranger

    assert first.process is not None
    stop(first.process)  # drained and gone: its tasks ended with it
    ended = await send(http, others[1].base, "tasks/get", {"taskId": task_id}, "ada")
    assert "error" in ended, ended
    assert "the gateway replica that ran it has stopped" in ended["error"]["message"]
    cluster.start(first)  # back, for the module's teardown check
