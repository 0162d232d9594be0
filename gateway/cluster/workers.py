"""`gateway serve --workers N`: N processes on one machine sharing the listening port.

The parent only starts and stops the workers.  Each worker is a full replica
(its own sessions, parked calls and upstream sessions) bound to the shared
port with SO_REUSEPORT, so the kernel spreads connections over them; they
relay to each other exactly as the replicas of a cluster do, through the
given ``--cluster`` store or, without one, a store in a private directory.
A worker that dies is started again (its sessions are gone: their clients get
404 and start new ones, as after any replica's crash).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from types import FrameType

STATE_KEY_ENV = "GATEWAY_STATE_KEY"
# A worker that keeps dying is not restarted more often than this (seconds).
RESTART_BACKOFF = 1.0


def worker_argv(argv: Sequence[str]) -> list[str]:
    """The parent's `serve` arguments less ``--workers`` (the workers get 1)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--workers":
            skip = True
        elif not arg.startswith("--workers="):
            out.append(arg)
    return out


def run_workers(count: int, serve_args: Sequence[str], cluster: str | None) -> int:
    """Run ``count`` workers until SIGTERM/SIGINT; the highest exit code of theirs."""
    env = {**os.environ, "GATEWAY_WORKERS": "1", "GATEWAY_REUSE_PORT": "true"}
    scratch = None
    if cluster is None:
        scratch = tempfile.mkdtemp(prefix="gateway-workers-")
        env["GATEWAY_CLUSTER"] = f"file://{scratch}"
    # The workers authenticate relays with the state key: one for all of them.
    env.setdefault(STATE_KEY_ENV, secrets.token_urlsafe(48))
    command = [sys.executable, "-m", "gateway", "serve", *worker_argv(serve_args)]
    stopping: list[int] = []
    told: set[int] = set()  # the workers sent the first signal

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)
                told.add(child.pid)

    children = [subprocess.Popen(command, env=env, start_new_session=True) for _ in range(count)]
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _supervise(children, command, env, stopping, told)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _supervise(
    children: list[subprocess.Popen[bytes]],
    command: list[str],
    env: dict[str, str],
    stopping: list[int],
    told: set[int],
) -> int:
    """Until every worker has exited after a signal: one that dies before is started
    again; one the signal missed (started while it came) is sent it here."""
    codes: dict[int, int] = {}
    while len(codes) < len(children):
        for index, child in enumerate(children):
            if index in codes:
                continue
            if child.poll() is None:
                if stopping and child.pid not in told:
                    child.send_signal(stopping[0])
                    told.add(child.pid)
                continue
            if stopping:
                codes[index] = child.returncode
                continue
            time.sleep(RESTART_BACKOFF)  # died on its own: started again, unless stopping
            if not stopping:
                children[index] = subprocess.Popen(command, env=env, start_new_session=True)
        if len(codes) < len(children):
            time.sleep(0.1)
    return max(codes.values(), default=0)
