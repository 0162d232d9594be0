"""`gateway serve --workers 2`: two processes share one port (SO_REUSEPORT) and relay
to each other through a local store, with no Redis and no --cluster."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.cluster.client import LegacyClient, greet_first, greet_retry, owner_of
from tests.cluster.conftest import _process, stop, wait_port
from tests.e2e.gateway_proc import REPO, free_port, wait_http

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[str]:
    demo_port, port = free_port(), free_port()
    demo_argv = [sys.executable, "-m", "gateway", "demo", "--listen", f"127.0.0.1:{demo_port}"]
    with _process(demo_argv, tmp_path / "demo.log") as demo:
        wait_port(demo_port, 10.0, demo)
        argv = [sys.executable, "-m", "gateway", "serve", "--workers", "2"]
        argv += [
            "--listen",
            f"127.0.0.1:{port}",
            "--route",
            f"/mcp=http://127.0.0.1:{demo_port}/mcp",
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
        log_path = tmp_path / "workers.log"
        with open(log_path, "wb") as log:
            parent = subprocess.Popen(
                argv,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz", 20.0, parent)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            code = stop(parent, signal.SIGTERM)
        assert code == 0, log_path.read_text()[-3000:]


async def test_two_workers_share_the_port_and_relay_to_each_other(workers: str) -> None:
    connector = aiohttp.TCPConnector(force_close=True)  # a new connection, maybe another worker
    async with aiohttp.ClientSession(connector=connector) as http:
        owners = set()
        for i in range(30):
            key, state = await greet_first(http, workers, 2 * i)
            owners.add(owner_of(state))
            status, body = await greet_retry(http, workers, 2 * i + 1, key, state, f"Ada{i}")
            assert body["result"]["content"][0]["text"] == f"Hello, Ada{i}!", (status, body)
        assert len(owners) == 2  # both workers parked calls; each retry found its owner
        client = LegacyClient(http, workers)
        await client.open()
        for n in range(10):
            status, body = await asyncio.wait_for(client.echo(f"w{n}"), 15)
            assert status == 200, body
