"""Public list results shared through Redis: a second replica serves a public
tools/list within its ttlMs without asking the upstream; a private (unmarked)
one is never shared.  Real processes: redis-server and two `gateway serve
--cluster` replicas; the upstream is a fake in this process, counting lists."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.cluster.client import post_json
from tests.cluster.conftest import STATE_KEY, _process, program, stop, wait_port
from tests.e2e.fake_client import modern_headers, modern_request
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import REPO, free_port, wait_http

pytestmark = pytest.mark.timeout(120)


@contextlib.contextmanager
def _redis(tmp: Path) -> Iterator[str]:
    port = free_port()
    argv = [program("redis-server"), "--port", str(port), "--bind", "127.0.0.1"]
    argv += ["--save", "", "--appendonly", "no", "--dir", str(tmp)]
    with _process(argv, tmp / "redis.log") as redis:
        wait_port(port, 10.0, redis)
        yield f"redis://127.0.0.1:{port}/0"


def _replica(tmp: Path, redis_url: str, routes: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = [sys.executable, "-m", "gateway", "serve", "--listen", f"127.0.0.1:{port}"]
    for route in routes:
        argv += ["--route", route]
    argv += ["--cluster", redis_url]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "GATEWAY_STATE_KEY": STATE_KEY}
    with open(tmp / f"gateway-{port}.log", "wb") as log:
        process = subprocess.Popen(
            argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    return process, f"http://127.0.0.1:{port}"


@pytest.fixture
async def two(tmp_path: Path) -> AsyncIterator[tuple[FakeUpstream, FakeUpstream, list[str]]]:
    async with FakeUpstream("ok") as public, FakeUpstream("ok") as private:
        routes = [f"/pub={public.url},ttl_ms=60000,cache_scope=public", f"/priv={private.url}"]
        with _redis(tmp_path) as redis_url:
            started = [_replica(tmp_path, redis_url, routes) for _ in range(2)]
            try:
                for process, base in started:
                    # In a thread: the fakes answer on this loop meanwhile.
                    await asyncio.to_thread(wait_http, base + "/healthz", 20.0, process)
                yield public, private, [base for _, base in started]
            finally:
                # In threads too: a stopping replica closes its sessions with the fakes.
                codes = await asyncio.gather(
                    *(asyncio.to_thread(stop, process) for process, _ in started)
                )
            assert list(codes) == [0, 0]


async def _tools(http: aiohttp.ClientSession, url: str) -> dict[str, object]:
    status, body, _ = await post_json(
        http, url, modern_request(1, "tools/list"), modern_headers("tools/list")
    )
    assert status == 200, body
    result: dict[str, object] = body["result"]
    assert [tool["name"] for tool in result["tools"]] == ["echo"]  # type: ignore[attr-defined]
    return result


async def test_a_public_list_is_served_by_another_replica_within_its_ttl(
    two: tuple[FakeUpstream, FakeUpstream, list[str]],
) -> None:
    public, _, (first, second) = two
    async with aiohttp.ClientSession() as http:
        result = await _tools(http, first + "/pub")
        assert result["cacheScope"] == "public" and result["ttlMs"] == 60000
        asked = public.lists
        assert asked >= 1
        again = await _tools(http, second + "/pub")
        assert public.lists == asked  # the second replica did not ask the upstream
        assert again["tools"] == result["tools"]


async def test_a_private_list_is_never_shared(
    two: tuple[FakeUpstream, FakeUpstream, list[str]],
) -> None:
    _, private, (first, second) = two
    async with aiohttp.ClientSession() as http:
        result = await _tools(http, first + "/priv")
        assert result["cacheScope"] == "private"
        asked = private.lists
        await _tools(http, second + "/priv")
        await _tools(http, first + "/priv")
        assert private.lists == asked + 2  # every replica asks, every time
