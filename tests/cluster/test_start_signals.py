"""A SIGTERM at a drawn moment of `gateway serve`'s start-up, with a real Redis as its
cluster store reached through a relay that holds each connection's first bytes for a
drawn delay (a store slow to answer), so the signal lands before, during and after
the join in turn.

Whatever the moment, the process ends within a bound, never with a traceback, and
leaves no registration behind: exit 0 once its handlers exist (from before anything
starts), or the signal's own exit (-15) when it came before them (the interpreter
importing, the settings read): then nothing may have been logged and the store never
reached.  The moment is drawn from the process's spawn, or from its first
connection to the store (the join, which the relay stretches).  The CI failure of stop
54 (a replica killed by a SIGTERM during start-up, -15 after "gateway listening")
was one such moment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cluster.conftest import STATE_KEY, _process, program, wait_port
from tests.e2e.gateway_proc import REPO, free_port

pytestmark = pytest.mark.timeout(300)


class SlowRelay:
    """TCP to ``target`` on a port of its own; each connection's first bytes from the
    client wait ``delay`` seconds before they go on.  ``touched`` once one came."""

    def __init__(self, target: int, delay: float) -> None:
        self.target = target
        self.delay = delay
        self.touched = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
                self.touched.set()
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                return
            self.open += [client, upstream]
            held = threading.Event()
            threading.Thread(target=self._pump, args=(client, upstream, held), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, None), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, held: threading.Event | None) -> None:
        try:
            while data := src.recv(65536):
                if held is not None and not held.is_set():
                    held.wait(self.delay)  # never set: a bounded wait, the drawn delay
                    held.set()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _shut(src, dst)

    def close(self) -> None:
        self.sock.close()
        _shut(*self.open)


def _shut(*socks: socket.socket) -> None:
    """Closed both ways: a recv blocked on one in another thread returns."""
    for each in socks:
        with contextlib.suppress(OSError):
            each.shutdown(socket.SHUT_RDWR)
        each.close()


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    tmp = tmp_path_factory.mktemp("start-signals")
    port = free_port()
    argv = [program("redis-server"), "--port", str(port), "--bind", "127.0.0.1"]
    argv += ["--save", "", "--appendonly", "no", "--dir", str(tmp)]
    with _process(argv, tmp / "redis.log") as process:
        wait_port(port, 10.0, process)
        yield port


def serve(relay: SlowRelay, log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "gateway", "serve", "--listen", "127.0.0.1:0"]
    argv += ["--route", f"/mcp=http://127.0.0.1:{free_port()}/mcp", "--drain-timeout", "1"]
    argv += ["--cluster", f"redis://127.0.0.1:{relay.port}/0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}  # logs at start
    env |= {"PYTHONUNBUFFERED": "1", "GATEWAY_STATE_KEY": STATE_KEY}
    with open(log, "wb") as out:
        return subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    anchor=st.sampled_from(["spawn", "store"]),
    offset=st.floats(0.0, 2.5),
    store_delay=st.floats(0.0, 1.0),
)
def test_a_sigterm_at_any_moment_of_start_up_ends_it_cleanly(
    redis_port: int, tmp_path: Path, anchor: str, offset: float, store_delay: float
) -> None:
    relay = SlowRelay(redis_port, store_delay)
    log = tmp_path / f"gateway-{anchor}-{offset:.3f}-{store_delay:.3f}.log"
    gateway = serve(relay, log)
    try:
        if anchor == "store":
            assert relay.touched.wait(60), "it never reached its store"
        try:
            gateway.wait(offset)  # the drawn moment (or its own end, if sooner)
        except subprocess.TimeoutExpired:
            gateway.send_signal(signal.SIGTERM)
        code = gateway.wait(30)
    finally:
        gateway.kill()
        relay.close()
    out = log.read_text(errors="replace")
    assert "Traceback" not in out, out
    if code == -signal.SIGTERM:  # only before it touched anything: the store, the log
        assert not relay.touched.is_set() and out.strip() == "", f"killed once started:\n{out}"
    else:
        assert code == 0, out
    client = redis.Redis(port=redis_port)
    try:
        assert list(client.scan_iter("gw:replica:*")) == [], out
    finally:
        client.close()
