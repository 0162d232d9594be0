"""Start the gateway the way a user does: `gateway serve` in its own process."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
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
    """A port free a moment ago (bound, then released: another process may take it).
    Prefer ``HeldPort``, or ``--listen 127.0.0.1:0`` read back, which ``gateway()`` does."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HeldPort:
    """A loopback port this process keeps for its whole life: bound with SO_REUSEPORT
    and never listening, so connections to it are refused until a server of this
    process binds it too (``reuse_port=True``), and refused again once that server
    stops (a restarted fake gets the same port back; no other process can take it)."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = int(self._sock.getsockname()[1])

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> HeldPort:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class RunningGateway:
    base: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def url(self, path: str = "/mcp") -> str:
        return self.base + path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


_LOGS = itertools.count(1)
_LISTENING = re.compile(
    r'"port": (\d+)[^\n]*"event": "gateway listening"|gateway listening.*port=(\d+)'
)


def _listening_port(log_path: Path, timeout: float, process: subprocess.Popen[bytes]) -> int:
    """The port the gateway logged it listens on (polled, bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = _LISTENING.search(log_path.read_text(errors="replace"))
        if match is not None:
            return int(match.group(1) or match.group(2))
        if process.poll() is not None:
            raise RuntimeError(
                f"the gateway exited with {process.returncode}:\n{log_path.read_text()}"
            )
        time.sleep(0.05)  # polling, bounded by the deadline
    raise TimeoutError(f"the gateway did not say which port it listens on within {timeout}s")


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


# Log lines that mean the gateway itself went wrong: an unhandled exception or an error.
_BAD_LINE = re.compile(r'Traceback|"level": "(error|critical)"|\[(error|critical)\s*\]')
# How long the gateway may take to drain and exit after SIGTERM before the test fails.
STOP_TIMEOUT = 15.0


def bad_log_lines(log: str, expected: tuple[str, ...] = ()) -> list[str]:
    """Lines of ``log`` that report an error, less those matching an ``expected`` pattern."""
    allowed = [re.compile(pattern) for pattern in expected]
    return [
        line
        for line in log.splitlines()
        if _BAD_LINE.search(line) and not any(a.search(line) for a in allowed)
    ]


def stop_and_check(running: RunningGateway, expected_errors: tuple[str, ...] = ()) -> None:
    """SIGTERM the gateway (unless the test already stopped it), then insist that it
    exited 0 in time and logged no error (other than lines matching ``expected_errors``)."""
    process = running.process
    if not _terminate(process):
        raise AssertionError(
            f"the gateway did not exit within {STOP_TIMEOUT}s of SIGTERM:\n{running.log()[-4000:]}"
        )
    log = running.log()
    assert process.returncode == 0, f"the gateway exited with {process.returncode}:\n{log[-4000:]}"
    bad = bad_log_lines(log, expected_errors)
    assert not bad, "the gateway logged errors:\n" + "\n".join(bad[:20])


def _terminate(process: subprocess.Popen[bytes]) -> bool:
    """SIGTERM a running process; False (after killing it) when it did not exit in time."""
    if process.poll() is not None:
        return True
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        _kill(process)
        return False
    return True


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(5)


@contextlib.contextmanager
def gateway(
    *routes: str,
    extra: tuple[str, ...] = (),
    tmp_path: Path,
    timeout: float = 20.0,
    expected_errors: tuple[str, ...] = (),
    check: bool = True,
    port: int | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[RunningGateway]:
    """``gateway serve`` in its own process.  When the test body succeeds, teardown
    SIGTERMs it and fails the test unless it exits 0 within ``STOP_TIMEOUT`` and its
    log holds no traceback or error line (``expected_errors``: regexes of lines the
    test expects; ``check=False`` only for a test that stops the process itself and
    checks the exit on its own)."""
    # Port 0 unless told: the gateway binds a free port and logs it (never a port
    # released by this process that another could take meanwhile).
    log_path = tmp_path / f"gateway-{next(_LOGS)}.log"
    argv = [sys.executable, "-m", "gateway", "serve", "--listen", f"127.0.0.1:{port or 0}"]
    for route in routes:
        argv += ["--route", route]
    argv += list(extra)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    running = RunningGateway(f"http://127.0.0.1:{port}", process, log_path)
    try:
        if not port:
            bound = _listening_port(log_path, timeout, process)
            running.base = f"http://127.0.0.1:{bound}"
        wait_http(running.url("/healthz"), timeout, process)
        yield running
    except BaseException:
        _terminate(process)
        raise
    if check:
        stop_and_check(running, expected_errors)
    else:
        _terminate(process)
