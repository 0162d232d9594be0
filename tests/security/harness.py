"""The security tests' processes: the demo upstream and `gateway serve` with a config
file of limits (and, for the descriptor test, a lowered RLIMIT_NOFILE)."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.e2e.gateway_proc import (
    REPO,
    STOP_TIMEOUT,
    RunningGateway,
    free_port,
    stop_and_check,
    wait_http,
)

START_WITHIN = 20.0


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(5)


@contextlib.contextmanager
def demo_upstream(tmp_path: Path) -> Iterator[str]:
    """The demo server in its own process; its URL."""
    log = open(tmp_path / "demo.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.security.demo_upstream", str(free_port())],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=log,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode().split()
        assert line[:1] == ["ready"], f"the demo upstream did not start: {line}"
        yield line[1]
    finally:
        _kill(process)
        log.close()


@contextlib.contextmanager
def modern_upstream() -> Iterator[str]:
    """bench.upstreams' 2026-07-28 echo server in its own process (a stateless
    upstream: the gateway keeps no upstream session); its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.upstreams", "modern", str(free_port()), str(free_port())],
        cwd=REPO,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().decode().strip()
        assert url.startswith("http://"), f"the modern upstream did not start: {url!r}"
        yield url
    finally:
        _kill(process)


def _toml(value: Any) -> str:
    return json.dumps(value)  # numbers, strings and lists of strings read the same


def _limit_descriptors(nofile: int | None) -> Callable[[], None]:
    def apply() -> None:
        os.setsid()  # its own group, stopped whole
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    return apply


@contextlib.contextmanager
def gateway(
    tmp_path: Path,
    upstream: str,
    *,
    settings: dict[str, Any] | None = None,
    route: dict[str, Any] | None = None,
    nofile: int | None = None,
    expected_errors: tuple[str, ...] = (),
    check: bool = True,
) -> Iterator[RunningGateway]:
    """`gateway serve` fronting ``upstream`` at /mcp, with ``settings`` in its config
    file (``route``: options of the route).  Teardown SIGTERMs it and insists on a
    clean exit (``check``)."""
    port = free_port()
    config = tmp_path / f"gateway-{port}.toml"
    lines = [f"{key} = {_toml(value)}" for key, value in (settings or {}).items()]
    lines += ["[[routes]]", 'path = "/mcp"', f"upstream = {_toml(upstream)}"]
    lines += [f"{key} = {_toml(value)}" for key, value in (route or {}).items()]
    config.write_text("\n".join(lines) + "\n")
    log_path = tmp_path / f"gateway-{port}.log"
    argv = [sys.executable, "-m", "gateway", "serve", "--listen", f"127.0.0.1:{port}"]
    argv += ["--config", str(config)]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            argv,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=_limit_descriptors(nofile),
        )
    running = RunningGateway(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_http(running.url("/healthz"), START_WITHIN, process)
        yield running
    except BaseException:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                _kill(process)
        raise
    if check:
        stop_and_check(running, expected_errors)
    elif process.poll() is None:
        _kill(process)


def wait_until(predicate: Callable[[], bool], within: float, what: str) -> None:
    """Poll ``predicate`` (bounded) for something a test cannot be told about."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {within}s")
