"""Signals at the edges of a process's life, as an orchestrator or a client sends them.

- A SIGTERM while `gateway serve` is still starting ends it cleanly (exit 0, its
  log saying so), never by the signal's default action (exit -15, nothing released).
- A cluster store it cannot reach is one line naming the store without its
  password, never a traceback.
- A SIGTERM to `gateway stdio` stops its stdio server gracefully, one that ignores
  the end of its input included: never left running, orphaned.

Real `gateway` processes; the "store" is a plain socket that accepts and never
answers (a Redis hung or behind a dropped route), or a port nobody listens on.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.gateway_proc import REPO, free_port

pytestmark = pytest.mark.timeout(120)

CANARY = "canary-store-password-7f3a"
ENV = {**os.environ, "GATEWAY_STATE_KEY": "startup-test-state-key-0123456789abcdef0123"}


class SilentStore:
    """Accepts connections and never answers; ``reached`` once one came."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.reached = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            self.reached.set()

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent_store() -> Iterator[SilentStore]:
    store = SilentStore()
    try:
        yield store
    finally:
        store.close()


def serve(store_port: int) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "gateway", "serve", "--listen", f"127.0.0.1:{free_port()}"]
    argv += ["--route", f"/mcp=http://127.0.0.1:{free_port()}/mcp"]
    argv += ["--cluster", f"redis://:{CANARY}@127.0.0.1:{store_port}/0"]
    return subprocess.Popen(
        argv, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_a_sigterm_while_starting_ends_it_cleanly(silent_store: SilentStore) -> None:
    gateway = serve(silent_store.port)
    try:
        # It is joining the cluster: past listening, not yet ready.
        assert silent_store.reached.wait(30), "the gateway never reached its store"
        gateway.send_signal(signal.SIGTERM)
        out, _ = gateway.communicate(timeout=30)
    finally:
        gateway.kill()
    assert gateway.returncode == 0, out
    assert "stopped before it was ready" in out
    assert "Traceback" not in out and CANARY not in out


def test_an_unreachable_store_is_one_line_without_its_password() -> None:
    gateway = serve(free_port())  # nobody listens there
    try:
        out, _ = gateway.communicate(timeout=60)
    finally:
        gateway.kill()
    assert gateway.returncode == 1, out
    assert "Traceback" not in out and CANARY not in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("Error: cannot join the cluster: store redis://127.0.0.1:"), out


# Answers initialize and tools/list; at the end of its input it stays (a server that
# ignores the graceful signal) until SIGTERM. Its pid is written where argv[1] says.
STUBBORN = """
import json, os, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
for line in sys.stdin:
    m = json.loads(line)
    if "id" in m and m.get("method") == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
             "serverInfo": {"name": "stubborn", "version": "1"}}
    elif "id" in m:
        r = {"tools": []}
    else:
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
while True:
    time.sleep(1)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_sigterm_to_gateway_stdio_stops_its_server_too(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(STUBBORN)
    pid_file = tmp_path / "server.pid"
    upstream = f"stdio:{sys.executable} {tmp_path / 'server.py'} {pid_file}"
    argv = [sys.executable, "-m", "gateway", "stdio", "--upstream", upstream]
    front = subprocess.Popen(
        argv, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert front.stdin is not None and front.stdout is not None
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ):
        front.stdin.write(json.dumps(message).encode() + b"\n")
    front.stdin.flush()
    try:
        answers = [json.loads(front.stdout.readline()) for _ in range(2)]
        assert answers[1] == {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}, answers
        server = int(pid_file.read_text())
        front.send_signal(signal.SIGTERM)
        _, err = front.communicate(timeout=30)
    finally:
        front.kill()
    assert front.returncode == 0, err.decode()[-2000:]
    assert not alive(server), "gateway stdio left its server running"
