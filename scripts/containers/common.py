"""The container check's shared pieces: where things are, how a step is recorded,
how a command is run, bounded waits."""

from __future__ import annotations

import base64
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(
    os.environ.get("MCP_GATEWAY_CONTAINER_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mcp-gateway-container"
)
RUN_DIR = Path("/run/mcp-gateway-container")  # podman's transient state (runroot, tmp)
PROJECT = "mcpgw-smoke"  # compose project name, and the prefix of every container here
IMAGE = "mcp-revision-gateway"  # the tag compose.yaml uses for the built image
# netavark sets up container networks with iptables: with --no-install-recommends it is
# not pulled in, and a build's RUN step then fails ("netavark: No such file or directory");
# likewise catatonit, the pause binary `podman kube play` needs for its infra container.
APT_PACKAGES = ["podman", "runc", "mmdebstrap", "netavark", "aardvark-dns", "iptables", "catatonit"]
# Debian bookworm's podman-compose (1.0.3) predates compose profiles, which the
# cluster check needs: a pinned one from PyPI, in a virtual environment of its own.
PODMAN_COMPOSE = "podman-compose==1.6.0"
SUITE, MIRROR = "bookworm", "http://deb.debian.org/debian"
STATE_KEY = base64.urlsafe_b64encode(os.urandom(32)).decode()
MODERN, HANDSHAKE = "2026-07-28", "2025-11-25"
ROUNDS = 6  # cluster rounds: enough that nginx's round-robin reaches every replica

results: list[tuple[str, bool, str]] = []
started = time.monotonic()


def say(message: str) -> None:
    print(f"[container-check {time.monotonic() - started:6.1f}s] {message}", flush=True)


def record(name: str, ok: bool, detail: str = "") -> bool:
    results.append((name, ok, detail))
    say(f"{'PASS' if ok else 'FAIL'}  {name}{f' ({detail})' if detail else ''}")
    return ok


class Failed(Exception):
    """A step that later steps depend on failed."""


def run(
    cmd: list[str],
    *,
    timeout: float = 120,
    check: bool = True,
    env: dict[str, str] | None = None,
    quiet: bool = True,
    cwd: Path = ROOT,
) -> subprocess.CompletedProcess[str]:
    """Run a command with a deadline; on failure (when checked) show its output."""
    try:
        done = subprocess.run(
            cmd,
            cwd=cwd,
            env=env,
            text=True,
            stdout=subprocess.PIPE if quiet else None,
            stderr=subprocess.STDOUT if quiet else None,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        raise Failed(f"timed out after {timeout:.0f}s: {' '.join(cmd)}\n{out[-3000:]}") from None
    if check and done.returncode != 0:
        raise Failed(f"exit {done.returncode}: {' '.join(cmd)}\n{(done.stdout or '')[-3000:]}")
    return done


def wait_until(what: str, probe: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
    """Poll `probe` until it returns something true, or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = probe()
            if last:
                return last
        except Exception as exc:  # reported if the deadline passes
            last = exc
        if time.monotonic() >= deadline:
            raise Failed(f"{what}: not within {timeout:.0f}s (last: {last!r})")
        time.sleep(interval)
