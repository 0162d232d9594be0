"""The processes under test: upstreams, reference proxies and gateways, each in its own group.

Everything binds to 127.0.0.1 on a free port.  Every process is started with
``start_new_session=True`` so it leads its own process group, and `Lab.close`
(also run from ``atexit``) ends each group: SIGTERM, a short wait, then SIGKILL.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


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


def open_fds(pid: int) -> int:
    """How many descriptors the process holds open."""
    return len(os.listdir(f"/proc/{pid}/fd"))


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
class Lab:
    """Every process of a run; `close` (also at exit) stops them all, newest first."""

    gateway_log_level: str = "warning"
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gw-bench-")))
    procs: list[Proc] = field(default_factory=list)

    def __post_init__(self) -> None:
        atexit.register(self.close)

    def _spawn(
        self, name: str, argv: list[str], extra_env: Mapping[str, str] | None = None
    ) -> Proc:
        log_path = self.workdir / f"{name}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(extra_env or {})}
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

    def upstream(
        self, kind: str, timeout: float = 30.0, *, port: int | None = None, name: str = ""
    ) -> Upstream:
        """``legacy`` (the demo server) or ``modern`` (bench.upstreams' echo server).
        Given a ``port``, it shares it with the others given it (SO_REUSEPORT)."""
        shared = port is not None
        port, stats_port = port or free_port(), free_port()
        argv = [sys.executable, "-m", "bench.upstreams", kind, str(port), str(stats_port)]
        argv += ["--reuse-port"] if shared else []
        proc = self._spawn(name or f"upstream-{kind}", argv)
        _wait_port(port, timeout, proc)
        _wait_port(stats_port, timeout, proc)
        return Upstream(proc, f"http://{HOST}:{port}/mcp", stats_port)

    def fast_upstream(self, kind: str, timeout: float = 30.0) -> Upstream:
        """``legacy`` or ``modern`` served by bench/fastup.js (Node, no SDK): a cheap
        upstream, so that a load beside it leaves the middle as what limits."""
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("the pinned lanes need Node.js (node) for bench/fastup.js")
        port = free_port()
        proc = self._spawn(f"fastup-{kind}", [node, "bench/fastup.js", kind, str(port)])
        _wait_port(port, timeout, proc)
        return Upstream(proc, f"http://{HOST}:{port}/mcp", 0)

    def otlp_sink(self, timeout: float = 30.0) -> Sink:
        """A local OTLP/HTTP trace sink (bench.otlpsink) for traced gateways."""
        port = free_port()
        proc = self._spawn("otlp-sink", [sys.executable, "-m", "bench.otlpsink", str(port)])
        _wait_port(port, timeout, proc)
        return Sink(proc, f"http://{HOST}:{port}")

    def refproxy(
        self,
        name: str,
        target: str,
        timeout: float = 30.0,
        wrapper: Sequence[str] = (),
        *,
        port: int | None = None,
        extra: Sequence[str] = (),
    ) -> Mid:
        """``wrapper``: a command the proxy runs under (``valgrind ...``); ``extra``: more
        options (``--route``, ``--reuse-port``, ``--uvloop``: see bench.refproxy)."""
        shared = port is not None
        port = port or free_port()
        argv = [*wrapper, sys.executable, "-m", "bench.refproxy", str(port), target, *extra]
        proc = self._spawn(name, argv)
        if shared:  # another may already answer on the port: this one says when it listens
            _wait_output(proc, "http://", timeout)
        _wait_port(port, timeout, proc)
        return Mid(proc, f"http://{HOST}:{port}/mcp", gateway=False)

    def gateway(
        self,
        name: str,
        target: str,
        *,
        uvloop: bool = False,
        profile_path: Path | None = None,
        trace_path: Path | None = None,
        timeout: float = 30.0,
        wrapper: Sequence[str] = (),
        launch: Sequence[str] = (),
        extra: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        port: int | None = None,
    ) -> Mid:
        """``trace_path``: run it under `bench.pathtrace` (see bench.path); ``launch``:
        more `bench.gwlaunch` options; ``extra``: more `serve` arguments (routes,
        ``--workers``); ``env``: more environment (``GATEWAY_*`` settings)."""
        port = port or free_port()
        launcher = [*wrapper, sys.executable, "-m", "bench.gwlaunch", *launch]
        if profile_path is not None:
            launcher += ["--profile", str(profile_path)]
        if trace_path is not None:
            launcher += ["--trace", str(trace_path)]
        argv = [
            *launcher,
            "--",
            "serve",
            "--listen",
            f"{HOST}:{port}",
            "--route",
            f"/mcp={target}",
            "--log-level",
            self.gateway_log_level,
            "--drain-timeout",
            "1",
            # Explicit both ways: the gateway's default (auto) takes uvloop when installed.
            "--loop",
            "uvloop" if uvloop else "asyncio",
            *extra,
        ]
        proc = self._spawn(name, argv, env)
        base = f"http://{HOST}:{port}"
        # /readyz answers 200 once the gateway has probed the upstream's revision.
        _wait_http(base + "/readyz", timeout, proc)
        return Mid(proc, base + "/mcp", gateway=True)

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()


@dataclass
class Upstream:
    proc: Proc
    url: str
    stats_port: int

    def counts(self) -> dict[str, int]:
        """Connections accepted and requests served so far (see bench.upstreams)."""
        with socket.create_connection((HOST, self.stats_port), timeout=5) as sock:
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
        counts: dict[str, int] = json.loads(data)
        return counts


@dataclass
class Sink:
    proc: Proc
    url: str

    def stats(self) -> dict[str, int]:
        """Export requests, bytes and spans received so far (see bench.otlpsink)."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(self.url + "/stats", timeout=5) as response:
            counts: dict[str, int] = json.loads(response.read())
        return counts

    def traced(self) -> dict[str, str]:
        """The environment that makes a gateway export its traces here (the SDK's
        defaults otherwise: every span sampled, batches of 512, every 5 s at most)."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.url, "OTEL_SERVICE_NAME": "bench-gateway"}


@dataclass
class Mid:
    """What sits between client and upstream: the reference proxy or a gateway."""

    proc: Proc
    url: str
    gateway: bool

    def stopped_from_outside(self) -> bool:
        """Whether the gateway logged a shutdown the benchmark did not ask for."""
        return self.gateway and "shutting down" in self.proc.log_path.read_text(errors="replace")


def _wait_port(port: int, timeout: float, proc: Proc) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.check_alive()
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{proc.name} did not listen on {HOST}:{port} within {timeout}s")


def _wait_output(proc: Proc, needle: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.check_alive()
        if needle in proc.log_path.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{proc.name} did not print {needle!r} within {timeout}s")


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
