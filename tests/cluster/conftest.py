"""A real cluster on loopback: redis-server, the demo upstream (`gateway demo`),
three `gateway serve --cluster` replicas and nginx round-robin in front of them.

`scripts/test` installs redis-server and nginx; a missing one fails here, by
name, never as a skipped test."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.gateway_proc import REPO, bad_log_lines, free_port, wait_http

STATE_KEY = "cluster-test-state-key-0123456789abcdef0123456789"
STOP_TIMEOUT = 20.0


def program(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if found is None:
        pytest.fail(f"'{name}' is not installed: run scripts/test (it installs it) or install it")
    return found


def wait_port(port: int, timeout: float, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {port} after {timeout}s")


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)
    return process.returncode


@dataclass
class Replica:
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@dataclass
class Cluster:
    tmp: Path
    redis_url: str
    upstream: str
    lb_port: int
    replicas: list[Replica] = field(default_factory=list)
    starts: int = 0
    # The replicas' --route values (default: /mcp in front of ``upstream``).
    routes: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.lb_port}/mcp"

    def start(
        self, replica: Replica, args: Sequence[str] = (), env: Mapping[str, str] | None = None
    ) -> None:
        """``replica`` started (``args``: more `serve` flags; ``env``: more variables)."""
        self.starts += 1
        replica.log_path = self.tmp / f"gateway-{replica.port}-{self.starts}.log"
        argv = [
            *(sys.executable, "-m", "gateway", "serve"),
            *("--listen", f"127.0.0.1:{replica.port}"),
            *(
                arg
                for route in self.routes or [f"/mcp={self.upstream}"]
                for arg in ("--route", route)
            ),
            *("--cluster", self.redis_url, "--drain-timeout", "5"),
            *args,
        ]
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "GATEWAY_STATE_KEY": STATE_KEY,
            **(env or {}),
        }
        with open(replica.log_path, "wb") as log:
            replica.process = subprocess.Popen(
                argv,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        wait_http(replica.base + "/healthz", 20.0, replica.process)
        # It answers before it has joined the cluster; "gateway listening" comes after.
        wait_log(replica, "gateway listening", 20.0)

    def kill(self, replica: Replica) -> None:
        assert replica.process is not None
        replica.process.kill()
        replica.process.wait(5)


def wait_log(replica: Replica, line: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while line not in replica.log():
        assert replica.process is not None
        if replica.process.poll() is not None or time.monotonic() > deadline:
            raise TimeoutError(f"no {line!r} in {replica.log_path}:\n{replica.log()}")
        time.sleep(0.05)


NGINX_CONF = """
daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/nginx-body;
    proxy_temp_path {tmp}/nginx-proxy;
    fastcgi_temp_path {tmp}/nginx-fastcgi;
    uwsgi_temp_path {tmp}/nginx-uwsgi;
    scgi_temp_path {tmp}/nginx-scgi;
    upstream gateways {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://gateways;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout {read_timeout}s;
            proxy_connect_timeout 2s;
        }}
    }}
}}
"""


@contextlib.contextmanager
def _process(argv: list[str], log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield process
    finally:
        stop(process)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    redis_server, nginx = program("redis-server"), program("nginx")
    tmp = tmp_path_factory.mktemp("cluster")
    redis_port, demo_port, lb_port = free_port(), free_port(), free_port()
    redis_argv = [redis_server, "--port", str(redis_port), "--bind", "127.0.0.1"]
    redis_argv += ["--save", "", "--appendonly", "no", "--dir", str(tmp)]
    demo_argv = [sys.executable, "-m", "gateway", "demo", "--listen", f"127.0.0.1:{demo_port}"]
    with (
        _process(redis_argv, tmp / "redis.log") as redis,
        _process(demo_argv, tmp / "demo.log") as demo,
    ):
        wait_port(redis_port, 10.0, redis)
        wait_port(demo_port, 10.0, demo)
        found = Cluster(
            tmp, f"redis://127.0.0.1:{redis_port}/0", f"http://127.0.0.1:{demo_port}/mcp", lb_port
        )
        with replicas_behind_nginx(found, nginx):
            yield found


@contextlib.contextmanager
def replicas_behind_nginx(cluster: Cluster, nginx: str, count: int = 3) -> Iterator[None]:
    """``count`` replicas started, nginx round-robin in front of them on the cluster's
    balancer port; on the way out every replica must exit 0 with no error logged."""
    tmp, lb_port = cluster.tmp, cluster.lb_port
    cluster.replicas = [Replica(free_port(), tmp / "unused.log") for _ in range(count)]
    try:
        for replica in cluster.replicas:
            cluster.start(replica)
        servers = "\n".join(
            f"        server 127.0.0.1:{r.port} max_fails=0;" for r in cluster.replicas
        )
        conf = tmp / "nginx.conf"
        conf.write_text(NGINX_CONF.format(tmp=tmp, servers=servers, port=lb_port, read_timeout=60))
        nginx_argv = [nginx, "-c", str(conf), "-p", str(tmp), "-e", str(tmp / "nginx-stderr.log")]
        with _process(nginx_argv, tmp / "nginx.log") as lb:
            wait_port(lb_port, 10.0, lb)
            yield
    finally:
        codes = [stop(r.process) for r in cluster.replicas if r.process is not None]
    assert codes == [0] * len(codes), f"replicas exited with {codes}"
    for replica in cluster.replicas:
        bad = bad_log_lines(replica.log())
        assert not bad, "a replica logged errors:\n" + "\n".join(bad[:20])
