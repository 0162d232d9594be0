"""The processes under test: the demo upstream and `gateway serve`, each in its own group.

Everything binds to 127.0.0.1 on a free port.  Every process is started with
``start_new_session=True`` so it leads its own process group, and `Stack.close`
(also run from ``atexit``) ends each group: SIGTERM, a short wait, then SIGKILL.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024

# The upstream: the gateway's bundled demo server, alone in its own process.
_UPSTREAM_CODE = """
import asyncio, sys
from gateway.demo import start_demo

async def main() -> None:
    runner, url = await start_demo("127.0.0.1", int(sys.argv[1]))
    print(url, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()

asyncio.run(main())
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def rss_kib(pid: int) -> int:
    """The process's resident set size (VmRSS), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far (utime + stime), in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    # After "pid (comm) ", fields[0] is the state (field 3): utime is field 14, stime 15.
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


@dataclass
class Proc:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss_kib(self) -> int:
        return rss_kib(self.pid)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{tail}")

    def stop(self, grace: float = 10.0) -> None:
        """End the process's group: SIGTERM, then SIGKILL after ``grace`` seconds.

        The group is signalled only while its leader is not reaped yet: an
        unreaped leader keeps its pid (the group id) from being recycled, so a
        signal can never reach some other process that got the number since.
        """
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(grace)
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(5)


@dataclass
class Stack:
    """The upstream and the gateway in front of it; stops both on close (or at exit)."""

    gateway_log_level: str = "info"
    # When set, the gateway runs under cProfile, which writes its stats here on exit.
    profile_path: Path | None = None
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gw-bench-")))
    procs: list[Proc] = field(default_factory=list)
    upstream_url: str = ""
    gateway_url: str = ""
    upstream: Proc = field(init=False)
    gateway: Proc = field(init=False)

    def __post_init__(self) -> None:
        atexit.register(self.close)

    def _spawn(self, name: str, argv: list[str]) -> Proc:
        log_path = self.workdir / f"{name}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # No proxy may divert loopback traffic.
        for key in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
            env.pop(key, None)
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                argv,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        proc = Proc(name, process, log_path)
        self.procs.append(proc)
        return proc

    def start(self, timeout: float = 30.0) -> None:
        up_port = free_port()
        self.upstream = self._spawn(
            "upstream", [sys.executable, "-c", _UPSTREAM_CODE, str(up_port)]
        )
        self.upstream_url = f"http://{HOST}:{up_port}/mcp"
        _wait_port(up_port, timeout, self.upstream)

        gw_port = free_port()
        profiler = ["-m", "cProfile", "-o", str(self.profile_path)] if self.profile_path else []
        argv = [
            sys.executable,
            *profiler,
            "-m",
            "gateway",
            "serve",
            "--listen",
            f"{HOST}:{gw_port}",
            "--route",
            f"/mcp={self.upstream_url}",
            "--log-level",
            self.gateway_log_level,
            "--drain-timeout",
            "1",
        ]
        self.gateway = self._spawn("gateway", argv)
        base = f"http://{HOST}:{gw_port}"
        self.gateway_url = base + "/mcp"
        # /readyz answers 200 once the gateway has probed the upstream's revision.
        _wait_http(base + "/readyz", timeout, self.gateway)

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()


def _wait_port(port: int, timeout: float, proc: Proc) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.check_alive()
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{proc.name} did not listen on {HOST}:{port} within {timeout}s")


def _wait_http(url: str, timeout: float, proc: Proc) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while time.monotonic() < deadline:
        proc.check_alive()
        try:
            with opener.open(url, timeout=2) as response:
                if response.status == 200:
                    return
        except Exception as exc:  # not up (or not ready) yet
            last = exc
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer 200 within {timeout}s: {last}")
