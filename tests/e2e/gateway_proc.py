"""Start the gateway the way a user does: `gateway serve` in its own process."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RunningGateway:
    base: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def url(self, path: str = "/mcp") -> str:
        return self.base + path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def wait_http(url: str, timeout: float, process: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``url`` until it answers 200 (bounded); fail early if the process died."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except Exception as exc:  # not up yet
            last = exc
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout}s: {last}")


@contextlib.contextmanager
def gateway(
    *routes: str, extra: tuple[str, ...] = (), tmp_path: Path, timeout: float = 20.0
) -> Iterator[RunningGateway]:
    port = free_port()
    log_path = tmp_path / f"gateway-{port}.log"
    argv = [sys.executable, "-m", "gateway", "serve", "--listen", f"127.0.0.1:{port}"]
    for route in routes:
        argv += ["--route", route]
    argv += list(extra)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    running = RunningGateway(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_http(running.url("/healthz"), timeout, process)
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
