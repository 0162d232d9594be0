"""Rate limits that hold across replicas: three `gateway serve --cluster` replicas
behind nginx round-robin, sharing a real redis-server, a limit of 10 calls a second
(burst 5) per caller, in front of the demo server behind a recording hop that notes
every call the server is sent and whose.

- 100 calls in one second from one caller get at most the burst plus what the rate
  refills in that time, answered by several replicas; the others get HTTP 429 with
  ``Retry-After`` and ``data.retryAfterSeconds``, and never reach the server;
  another caller at the same time is unaffected.
- Redis stopped mid-run: the fail-open route keeps answering from each replica's own
  buckets, the fail-closed one answers 503; each replica says so in its log.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
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
    wait_log,
    wait_port,
)
from tests.e2e.fake_client import modern_headers, modern_request
from tests.e2e.gateway_proc import free_port
from tests.policy.recorder import Recorder, recording

pytestmark = pytest.mark.timeout(300)

RATE, BURST = 10, 5
LIMITS = f"rate={RATE}/s,burst={BURST}"
CALLS = 100
ALICE, BOB, CAROL = "Bearer alice", "Bearer bob", "Bearer carol"
OPEN_LOG = "rate limit store unreachable: each replica limits on its own (fail open)"
CLOSED_LOG = "rate limit store unreachable: limited calls are refused (fail closed)"


@dataclass
class Setup:
    cluster: Cluster
    recorder: Recorder
    redis: Any  # the redis-server process, which a test stops

    def url(self, route: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.cluster.lb_port}{route}"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    nginx = program("nginx")
    tmp = tmp_path_factory.mktemp("rate-cluster")
    redis_port, demo_port = free_port(), free_port()
    redis_argv = [program("redis-server"), "--port", str(redis_port), "--bind", "127.0.0.1"]
    redis_argv += ["--save", "", "--appendonly", "no", "--dir", str(tmp)]
    demo_argv = [sys.executable, "-m", "gateway", "demo", "--listen", f"127.0.0.1:{demo_port}"]
    with (
        _process(redis_argv, tmp / "redis.log") as redis,
        _process(demo_argv, tmp / "demo.log") as demo,
    ):
        wait_port(redis_port, 10.0, redis)
        wait_port(demo_port, 10.0, demo)
        with recording(f"http://127.0.0.1:{demo_port}") as recorder:
            upstream = f"{recorder.url}/mcp"
            cluster = Cluster(tmp, f"redis://127.0.0.1:{redis_port}/0", upstream, free_port())
            cluster.routes = [
                f"/mcp={upstream},{LIMITS}",
                f"/strict={upstream},{LIMITS},rate_fallback=closed",
            ]
            with replicas_behind_nginx(cluster, nginx):
                yield Setup(cluster, recorder, redis)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # A fresh connection per request: nginx picks the next replica for each one.
    connector = aiohttp.TCPConnector(force_close=True, limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        yield session


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def replica(self) -> str:
        """Which replica answered: its request ids start with a prefix of its own."""
        return self.headers.get("x-request-id", "")[:16]


async def add(http: aiohttp.ClientSession, url: str, caller: str, n: int) -> Answer:
    body = modern_request(n, "tools/call", {"name": "add", "arguments": {"a": n, "b": 1}})
    headers = {**modern_headers("tools/call", "add"), "Authorization": caller}
    status, answer, got = await post_json(http, url, body, headers)
    return Answer(status, answer, {name.lower(): value for name, value in got.items()})


async def paced(
    http: aiohttp.ClientSession, url: str, caller: str, count: int, every: float
) -> list[Answer]:
    """``count`` calls, one sent every ``every`` seconds (each answered on its own)."""
    start = time.monotonic()

    async def one(n: int) -> Answer:
        await asyncio.sleep(max(0.0, start + n * every - time.monotonic()))  # the pacing
        return await add(http, url, caller, n)

    return list(await asyncio.gather(*(one(n) for n in range(count))))


def check_refusal(answer: Answer) -> None:
    assert answer.status == 429, answer
    after = int(answer.headers["retry-after"])
    assert after >= 1
    error = answer.body["error"]
    assert error["code"] == -32000, error
    assert error["data"] == {"retryAfterSeconds": after}, error


async def test_one_limit_holds_across_the_replicas(
    setup: Setup, http: aiohttp.ClientSession
) -> None:
    url = setup.url()
    started = time.monotonic()
    alice_calls = paced(http, url, ALICE, CALLS, 1.0 / CALLS)
    bob_calls = paced(http, url, BOB, BURST, 0.1)
    alice, bob = await asyncio.gather(alice_calls, bob_calls)
    elapsed = time.monotonic() - started
    answered = [a for a in alice if a.status == 200]
    refused = [a for a in alice if a.status != 200]
    # What a bucket of 5 refilled at 10 a second can give in that time, one token of
    # slack; and at least the burst itself.
    assert BURST <= len(answered) <= BURST + RATE * elapsed + 1, (len(answered), elapsed)
    assert elapsed < 5.0  # the calls did come within a few seconds of each other
    assert len({a.replica for a in answered}) >= 2  # several replicas answered, one limit
    for answer in answered:
        assert answer.body["result"]["structuredContent"]["sum"] == answer.body["id"] + 1
    for answer in refused:
        check_refusal(answer)
    # The other caller, meanwhile, got everything it asked for.
    assert [a.status for a in bob] == [200] * BURST
    # The upstream heard the answered calls only.
    assert len(setup.recorder.calls("tools/call", ALICE)) == len(answered)
    assert len(setup.recorder.calls("tools/call", BOB)) == BURST


async def test_with_redis_stopped_each_route_answers_by_its_fallback(
    setup: Setup, http: aiohttp.ClientSession
) -> None:
    assert stop(setup.redis) == 0
    # Fail open: every call is answered, from each replica's own buckets (so up to
    # three bursts at once across the three replicas).
    answers = await paced(http, setup.url("/mcp"), CAROL, 30, 0.01)
    statuses = {a.status for a in answers}
    assert statuses <= {200, 429} and 200 in statuses, [a.status for a in answers]
    answered = sum(a.status == 200 for a in answers)
    assert answered <= 3 * (BURST + RATE * 1.0) + 3
    for answer in answers:
        if answer.status == 429:
            check_refusal(answer)
    # Fail closed: refused, with when to try again.
    for n in range(3):
        answer = await add(http, setup.url("/strict"), CAROL, n)
        assert answer.status == 503, answer
        assert answer.headers["retry-after"] == "1"
        assert answer.body["error"]["data"] == {"retryAfterSeconds": 1}
    for replica in setup.cluster.replicas:
        # Every replica took calls of both routes, so every one says so (bounded wait),
        # once a route, naming it.
        wait_log(replica, OPEN_LOG, 20.0)
        wait_log(replica, CLOSED_LOG, 20.0)
        lines = replica.log().splitlines()
        said = [line for line in lines if "rate limit store unreachable" in line]
        assert len(said) == 2, said
        assert '"route": "/mcp"' in said[0] + said[1] and '"route": "/strict"' in said[0] + said[1]
