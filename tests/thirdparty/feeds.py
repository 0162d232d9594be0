"""Drives ``feeds_client.py`` (a pinned SDK client) from a test, and server-everything's
feeds: what it sends on its own, and how a test tells one session's from another's.

server-everything (2026.8.31) sends, on each session's standalone stream:

- ``notifications/message`` at ``info`` acknowledging ``resources/subscribe``
  ("Received Subscribe Resource request for URI: <uri> from session <id>"), filtered by
  the level the session set (``logging/setLevel``);
- after tool ``toggle-simulated-logging``: one log at once, then one every 5 s, of a
  random level, "<Level>-level message - SessionId <id>", filtered the same way;
- after tool ``toggle-subscriber-updates``: ``notifications/resources/updated`` for each
  URI the session subscribed to, at once and every 5 s;
- ``notifications/resources/list_changed`` when tool ``gzip-file-as-resource`` registers
  a session resource (``data:`` URIs need no network).
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).with_name("feeds_client.py")
LEGACY_CLIENT = "python-1.22.0-client"  # 2025-06-18, Streamable HTTP
MODERN_CLIENT = "python-2.3.0-client"  # 2026-07-28
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
# One bounded wait for anything the server sends at once (it usually takes milliseconds).
SOON = 15.0
UPDATED = "notifications/resources/updated"
LOG = "notifications/message"
GZIP_ARGS = {
    "name": "feeds.txt.gz",
    "data": "data:text/plain;base64,aGVsbG8=",
    "outputType": "resource",
}

Line = dict[str, Any]


class FeedsClient:
    """One ``feeds_client.py`` process: commands in, replies and notifications out."""

    def __init__(self, python: str, url: str, era: str, authorization: str = "") -> None:
        argv = [python, str(SCRIPT), url, era, authorization]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self._lines: queue.Queue[Line | None] = queue.Queue()
        self.events: list[Line] = []
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        self.ready = self._next(lambda line: "ready" in line, 60.0)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                self._lines.put(json.loads(raw))
            except ValueError:
                continue
        self._lines.put(None)

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr = (self.stderr + raw)[-20000:]

    def _next(self, wanted: Callable[[Line], bool], timeout: float) -> Line:
        """Lines until one is ``wanted`` (bounded); events seen meanwhile are kept."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(left, 0.001))
            except queue.Empty:
                raise TimeoutError(f"nothing wanted within {timeout}s; {self.report()}") from None
            if line is None:
                raise RuntimeError(f"the client exited; {self.report()}")
            if "event" in line or "listen" in line:
                self.events.append(line)
            if wanted(line):
                return line

    def do(self, op: str, timeout: float = 60.0, **args: Any) -> Line:
        """Send one command; its reply (which must be ``ok``)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"op": op, **args}) + "\n").encode())
        self.proc.stdin.flush()
        reply = self._next(lambda line: line.get("reply") == op, timeout)
        assert reply["ok"], f"{op} failed: {reply}; {self.report()}"
        return reply

    def wait(self, wanted: Callable[[Line], bool], timeout: float = SOON) -> Line:
        """The first event (already seen or still to come) that is ``wanted``."""
        for line in self.events:
            if wanted(line):
                return line
        return self._next(
            lambda line: ("event" in line or "listen" in line) and wanted(line), timeout
        )

    def settle(self) -> None:
        """Take in what has already arrived, without waiting."""
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return
            if line is not None and ("event" in line or "listen" in line):
                self.events.append(line)

    def logs(self) -> list[Line]:
        self.settle()
        return [e["params"] for e in self.events if e.get("event") == LOG]

    def of(self, method: str) -> list[Line]:
        self.settle()
        return [e["params"] for e in self.events if e.get("event") == method]

    def close(self) -> None:
        """Exit cleanly (the SDK ends its session: DELETE), killed if it hangs."""
        if self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.write(b'{"op": "exit"}\n')
                self.proc.stdin.close()
                self.proc.wait(20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(5)

    def report(self) -> str:
        return (
            f"events: {json.dumps(self.events[-20:])[-3000:]}\n"
            f"client stderr: {self.stderr.decode(errors='replace')[-2000:]}"
        )

    def __enter__(self) -> FeedsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_event(line: Line) -> bool:
    return "event" in line or "listen" in line


def is_log(level_or_text: str | re.Pattern[str]) -> Callable[[Line], bool]:
    """A log event whose text contains ``level_or_text`` (or matches that pattern)."""
    if isinstance(level_or_text, re.Pattern):
        found = level_or_text.search
        return lambda e: e.get("event") == LOG and bool(found(str(e["params"].get("data"))))
    return lambda e: e.get("event") == LOG and level_or_text in str(e["params"].get("data"))


def updated(uri: str) -> Callable[[Line], bool]:
    return lambda e: e.get("event") == UPDATED and e["params"].get("uri") == uri


def below(level: str, logs: list[Line]) -> list[Line]:
    """The logs below ``level`` (should be none)."""
    floor = LEVELS.index(level)
    return [entry for entry in logs if LEVELS.index(entry["level"]) < floor]


class Restartable:
    """server-everything over Streamable HTTP on one port, stopped and started again
    (its sessions die with the process).  Node cannot share a port held with
    SO_REUSEPORT, so the port is one free a moment ago, re-bound at once on restart."""

    def __init__(self, server: Any, log_dir: Path) -> None:
        from peers.registry import free_port

        self.server, self.port, self.log_dir = server, free_port(), log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        import os

        from peers.registry import READY_TIMEOUT, ROOT, _port_open, _tail

        self.starts += 1
        log = self.log_dir / f"everything-{self.port}-{self.starts}.log"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.server.argv("streamable-http"),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env={**os.environ, "PORT": str(self.port)},
                start_new_session=True,
                cwd=ROOT,
            )
        deadline = time.monotonic() + READY_TIMEOUT
        while not _port_open("127.0.0.1", self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server-everything did not listen on {self.port}: {_tail(log)}")
            time.sleep(0.05)  # polling, bounded by the deadline

    def stop(self) -> None:
        from peers.registry import _stop

        if self.proc is not None:
            _stop(self.proc)
            self.proc = None

    def __enter__(self) -> Restartable:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
