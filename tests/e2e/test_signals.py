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
import time
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


# A stdio server that answers initialize, tools/list and `slow` (after `seconds`,
# having touched argv[1] + ".called"); at the end of its input it stays (a server that
# ignores the graceful signal) until SIGTERM. Its pid is written to argv[1].
STUBBORN = """
import json, os, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
TOOL = {"name": "slow", "inputSchema": {"type": "object"}}
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
             "serverInfo": {"name": "stubborn", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [TOOL]}
    elif m["method"] != "tools/call":
        r = {}
    else:
        open(sys.argv[1] + ".called", "w").close()
        time.sleep(m["params"]["arguments"]["seconds"])
        r = {"content": [{"type": "text", "text": "done"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
while True:
    time.sleep(1)
"""
HELLO = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class StdioFront:
    """`gateway stdio` in front of the stubborn server, a session open."""

    def __init__(self, tmp_path: Path) -> None:
        (tmp_path / "server.py").write_text(STUBBORN)
        self.pid_file = tmp_path / "server.pid"
        upstream = f"stdio:{sys.executable} {tmp_path / 'server.py'} {self.pid_file}"
        argv = [sys.executable, "-m", "gateway", "stdio", "--upstream", upstream]
        argv += ["--log-level", "info"]
        self.process = subprocess.Popen(
            argv, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert [self.read()["id"] for _ in range(2)] == [1, 2]
        self.server = int(self.pid_file.read_text())

    def send(self, message: dict[str, object]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def read(self) -> dict[str, object]:
        assert self.process.stdout is not None
        answer: dict[str, object] = json.loads(self.process.stdout.readline())
        return answer

    def call_slow(self, seconds: float) -> None:
        """A `slow` call, returned once the server has it."""
        params = {"name": "slow", "arguments": {"seconds": seconds}}
        self.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params})
        called = Path(f"{self.pid_file}.called")
        deadline = time.monotonic() + 20
        while not called.exists():  # the server's own mark: no sleep stands in for it
            assert time.monotonic() < deadline, "the call never reached the server"
            time.sleep(0.02)

    def logged(self, event: str) -> None:
        """Returns once its log has said ``event`` (a signal handled, say)."""
        assert self.process.stderr is not None
        while event not in (line := self.process.stderr.readline().decode()):
            assert line, f"it ended without logging {event!r}"

    def end(self) -> str:
        """Its exit, within 30 s; what it logged."""
        # Its input stays open (communicate would close it: an end of input that
        # would stop it without the signal); closed once it has exited.
        kept, self.process.stdin = self.process.stdin, None
        _, err = self.process.communicate(timeout=30)
        if kept is not None and not kept.closed:
            kept.close()
        return bytes(err).decode(errors="replace")

    def close(self) -> None:
        self.process.kill()
        self.process.wait(5)
        if alive(self.server):
            os.kill(self.server, signal.SIGKILL)


@pytest.fixture
def front(tmp_path: Path) -> Iterator[StdioFront]:
    started = StdioFront(tmp_path)
    try:
        yield started
    finally:
        started.close()


def test_a_sigterm_to_gateway_stdio_stops_its_server_too(front: StdioFront) -> None:
    front.process.send_signal(signal.SIGTERM)
    err = front.end()
    assert front.process.returncode == 0, err[-2000:]
    assert not alive(front.server), "gateway stdio left its server running"


def test_a_call_in_flight_at_a_sigterm_is_answered_first(front: StdioFront) -> None:
    front.call_slow(1.0)
    front.process.send_signal(signal.SIGTERM)
    assert front.read() == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"content": [{"type": "text", "text": "done"}]},
    }
    err = front.end()
    assert front.process.returncode == 0, err[-2000:]
    assert not alive(front.server)


def test_a_second_signal_after_the_end_of_input_ends_the_wait(front: StdioFront) -> None:
    front.call_slow(120.0)
    assert front.process.stdin is not None
    front.process.stdin.close()  # the client's end: the call gets its grace...
    front.process.send_signal(signal.SIGTERM)  # ...which a first signal leaves,
    front.logged('"shutting down"')  # (two signals at once would be one)
    started = time.monotonic()
    front.process.send_signal(signal.SIGTERM)  # and a second ends
    err = front.end()
    assert front.process.returncode == 0, err[-2000:]
    # Within the stdio server's own stop (end of input, 2 s, SIGTERM), not the
    # call's 10 s grace.
    assert time.monotonic() - started < 9.0, err[-2000:]
    assert not alive(front.server)
