"""Request-shape fuzzing: every revision's requests, well-formed and not, against the
gateway's two inbound transports (Streamable HTTP, stdio).  What must hold: no
HTTP 5xx, every request with an id answered (a 4xx or a JSON-RPC error counts),
and no descriptor or memory growth.

    python -m bench.fuzz                    # 100,000 messages, 2-5 minutes
    python -m bench.fuzz --messages 20000 --seed 7 --json

The generator (:func:`shape`) takes a ``random.Random``: the hypothesis test in
tests/security/test_fuzz.py draws that from hypothesis, so both explore the
same shapes.  Everything runs on 127.0.0.1: the demo upstream, `gateway serve`
and `gateway stdio` as real processes, stopped on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.procs import open_fds, rss_kib

REPO = Path(__file__).resolve().parents[1]
MODERN = "2026-07-28"
HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
REVISIONS = (*HANDSHAKE, MODERN)
BATCHES = ("2024-11-05", "2025-03-26")  # the revisions with JSON-RPC batches
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
METHODS = (
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "subscriptions/listen",
    "tasks/get",
    "tasks/cancel",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "vendor/anything",
)
# Names the upstream knows (greet_me would wait for a person: left out).
TOOLS = ("echo", "add", "no-such-tool")
# How long one message may take to be answered before it counts as unanswered.
ANSWER_WITHIN = 15.0


# ------------------------------------------------------------------ the shapes


def _scalar(rng: random.Random) -> Any:
    return rng.choice(
        [
            None,
            True,
            False,
            rng.randint(-(2**63), 2**63),
            rng.random() * 1e6,
            "",
            "x" * rng.randint(1, 64),
            "\u0000\ud7ff\U0001f600",
            rng.choice(METHODS),
        ]
    )


def value(rng: random.Random, depth: int = 0) -> Any:
    """Any JSON value, small, mostly shallow."""
    roll = rng.random()
    if depth > 4 or roll < 0.5:
        return _scalar(rng)
    if roll < 0.75:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {
        rng.choice(["a", "name", "_meta", "uri", "arguments", "text", "x" * 8]): value(
            rng, depth + 1
        )
        for _ in range(rng.randint(0, 4))
    }


def _meta(rng: random.Random) -> Any:
    if rng.random() < 0.15:
        return value(rng)
    meta: dict[str, Any] = {
        PV: MODERN if rng.random() < 0.8 else _scalar(rng),
        CAPS: {"elicitation": {}} if rng.random() < 0.8 else _scalar(rng),
        INFO: {"name": "fuzz", "version": "0"},
    }
    if rng.random() < 0.2:
        meta.pop(rng.choice(list(meta)))
    return meta


def _params(rng: random.Random, method: str, revision: str) -> Any:
    roll = rng.random()
    if roll < 0.15:
        return value(rng)  # any JSON value at all (arrays, strings, numbers...)
    params: dict[str, Any] = {}
    if method == "tools/call":
        params = {"name": rng.choice(TOOLS), "arguments": rng.choice([{"text": "hi"}, value(rng)])}
    elif method in ("resources/read", "resources/subscribe"):
        params = {"uri": rng.choice(["demo://readme", "nope://", _scalar(rng)])}
    elif method == "prompts/get":
        params = {"name": "greeting", "arguments": rng.choice([{"name": "x"}, value(rng)])}
    elif method == "initialize":
        params = {
            "protocolVersion": rng.choice([revision, "1999-01-01", _scalar(rng)]),
            "capabilities": rng.choice([{}, value(rng)]),
            "clientInfo": {"name": "fuzz", "version": "0"},
        }
    elif method == "notifications/cancelled":
        params = {"requestId": _scalar(rng)}
    elif method == "logging/setLevel":
        params = {"level": rng.choice(["debug", "nope", _scalar(rng)])}
    if revision == MODERN and rng.random() < 0.9:
        params["_meta"] = _meta(rng)
    if rng.random() < 0.1:
        params["inputResponses"] = value(rng)
        params["requestState"] = _scalar(rng)
    if rng.random() < 0.1:
        params[rng.choice(["extra", "cursor", "_meta"])] = value(rng)
    return params


def message(rng: random.Random, revision: str) -> Any:
    """One JSON-RPC message: mostly plausible, sometimes wrong in one place."""
    method = rng.choice(METHODS) if rng.random() < 0.95 else _scalar(rng)
    out: dict[str, Any] = {"jsonrpc": "2.0" if rng.random() < 0.95 else _scalar(rng)}
    is_notification = isinstance(method, str) and method.startswith("notifications/")
    if not is_notification or rng.random() < 0.1:
        out["id"] = rng.choice([rng.randint(0, 10**6), f"id-{rng.randint(0, 10**6)}", _scalar(rng)])
    out["method"] = method
    if rng.random() < 0.9:
        out["params"] = _params(rng, method if isinstance(method, str) else "", revision)
    if rng.random() < 0.03:
        out = {"jsonrpc": "2.0", "id": rng.randint(0, 99), "result": value(rng)}  # a reply
    return out


@dataclass
class Shape:
    """One fuzzed message as it goes on the wire."""

    revision: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    # The id its answer must carry (None: no answer is owed, or it cannot be matched).
    owed: Any = None
    use_session: bool = False


def _owed(body: Any) -> Any:
    """The id a JSON-RPC answer must carry: a request's valid id (batches: the first)."""
    first = body[0] if isinstance(body, list) and body else body
    if not isinstance(first, dict) or "method" not in first:
        return None
    id_ = first.get("id")
    if isinstance(id_, bool) or not isinstance(id_, int | str):
        return None
    return id_


def shape(rng: random.Random, revision: str | None = None) -> Shape:
    """A request shape of ``revision`` (any, when None), for either transport."""
    revision = revision or rng.choice(REVISIONS)
    roll = rng.random()
    body: Any
    if roll < 0.03:
        raw = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
        return Shape(revision, raw.replace(b"\n", b" "), _headers(rng, revision, None))
    if roll < 0.08 and revision in BATCHES:
        body = [message(rng, revision) for _ in range(rng.choice([0, 1, 3, 70]))]
    else:
        body = message(rng, revision)
    data = orjson.dumps(body)
    owed = _owed(body)
    if rng.random() < 0.04:  # nesting no recursive code may walk
        depth = rng.choice([70, 300, 1100])
        data = data.replace(b'"hi"', b'{"a":' * depth + b"1" + b"}" * depth, 1)
        if depth > 1000 and b'{"a":' in data:
            owed = None  # past what JSON parsers take: a parse error, with a null id
    shaped = Shape(revision, data, _headers(rng, revision, body), owed)
    shaped.use_session = revision in HANDSHAKE and rng.random() < 0.9
    return shaped


def _headers(rng: random.Random, revision: str, body: Any) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if rng.random() < 0.05:
        headers["Content-Type"] = rng.choice(["text/plain", ""])
    if rng.random() < 0.05:
        headers["Accept"] = "text/html"
    if revision != "2024-11-05" and rng.random() < 0.9:
        headers["MCP-Protocol-Version"] = revision if rng.random() < 0.9 else "nope"
    if revision == MODERN and isinstance(body, dict):
        method = body.get("method")
        if _header_safe(method) and rng.random() < 0.9:
            headers["Mcp-Method"] = method
        params = body.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if _header_safe(name):
            headers["Mcp-Name"] = name
    return headers


def _header_safe(text: Any) -> bool:
    return isinstance(text, str) and text.isascii() and text.isprintable()


# ----------------------------------------------------------------- the targets


class HttpTarget:
    """Streamable HTTP on one keep-alive connection, a session per handshake revision."""

    def __init__(self, base: str, path: str = "/mcp") -> None:
        host, port = base.removeprefix("http://").split(":")
        self.host, self.port, self.path = host, int(port), path
        self.conn = http.client.HTTPConnection(host, self.port, timeout=ANSWER_WITHIN)
        self.sessions: dict[str, str] = {}

    def open_sessions(self) -> None:
        for revision in HANDSHAKE:
            init = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": revision,
                    "capabilities": {},
                    "clientInfo": {"name": "fuzz", "version": "0"},
                },
            }
            status, headers, _ = self.post(orjson.dumps(init), _base(revision))
            assert status == 200, f"initialize {revision}: HTTP {status}"
            if "mcp-session-id" in headers:  # (2024-11-05 has sessions on HTTP+SSE only)
                self.sessions[revision] = headers["mcp-session-id"]

    def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        for attempt in range(2):
            try:
                self.conn.request("POST", self.path, body=body, headers=headers)
                response = self.conn.getresponse()
                data = response.read()
                got = {k.lower(): v for k, v in response.getheaders()}
                if got.get("connection", "").lower() == "close":
                    self.conn.close()
                return response.status, got, data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()  # the server ended a keep-alive connection: once more
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def send(self, item: Shape) -> str | None:
        """None when the answer is acceptable, else what was wrong."""
        headers = dict(item.headers)
        if item.use_session and item.revision in self.sessions:
            headers["Mcp-Session-Id"] = self.sessions[item.revision]
        try:
            status, _, data = self.post(item.body, headers)
        except TimeoutError:
            return "no answer (timed out)"
        if status >= 500:
            return f"HTTP {status}: {data[:200]!r}"
        if item.owed is not None and status == 200 and not _answers(data, item.owed):
            return f"HTTP 200 without an answer to {item.owed!r}: {data[:200]!r}"
        return None

    def close(self) -> None:
        self.conn.close()


def _base(revision: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if revision != "2024-11-05":
        headers["MCP-Protocol-Version"] = revision
    return headers


def _answers(data: bytes, owed: Any) -> bool:
    """Whether a JSON or SSE body holds a JSON-RPC answer with id ``owed``."""
    texts = [data]
    if data.startswith((b"event:", b"data:")) or b"\ndata:" in data:
        texts = [
            line[5:].strip()
            for line in data.replace(b"\r\n", b"\n").split(b"\n")
            if line[:5] == b"data:"
        ]
    for text in texts:
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        for item in parsed if isinstance(parsed, list) else [parsed]:
            if (
                isinstance(item, dict)
                and item.get("id") == owed
                and ("result" in item or "error" in item)
            ):
                return True
    return False


class StdioTarget:
    """`gateway stdio` as a child: one line in, its answers out (read by a thread)."""

    def __init__(self, upstream: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway", "stdio", "--upstream", upstream],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.seen: set[Any] = set()
        self._sentinels = 0
        self.null_errors = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, item: Shape) -> str | None:
        """Write the line, then a ping; read until the ping's answer and (if owed) the
        fuzzed message's have come."""
        assert self.proc.stdin is not None
        self._sentinels += 1
        sentinel = f"sentinel-{self._sentinels}"
        ping = orjson.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"})
        owed = (
            item.owed
            if not isinstance(item.owed, str) or not item.owed.startswith("sentinel")
            else None
        )
        try:
            self.proc.stdin.write(item.body.replace(b"\n", b" ") + b"\n" + ping + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return "the stdio gateway exited"
        deadline = time.monotonic() + ANSWER_WITHIN
        wanted = {sentinel} | ({owed} if owed is not None else set())
        self.null_errors = 0
        # A batch refused whole is answered by one error with a null id.
        while not wanted <= self.seen and not (
            item.body.startswith(b"[") and sentinel in self.seen and self.null_errors
        ):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return f"no answer to {sorted(map(str, wanted - self.seen))}"
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if not line:
                return "the stdio gateway exited"
            self._note(line)
        self.seen.clear()
        return None

    def _note(self, line: bytes) -> None:
        try:
            parsed = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
        for item in parsed if isinstance(parsed, list) else [parsed]:
            if isinstance(item, dict) and ("result" in item or "error" in item):
                id_ = item.get("id")
                if isinstance(id_, int | str):
                    self.seen.add(id_)
                elif id_ is None:
                    self.null_errors += 1

    def close(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


# ------------------------------------------------------------------- processes


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Lab:
    """The demo upstream (handshake era, route /mcp), a stateless one (bench.upstreams'
    2026-07-28 echo server, route /m) and `gateway serve` in front of both."""

    upstream: str
    gateway: str
    procs: list[subprocess.Popen[bytes]]
    modern: str = ""

    @property
    def gateway_pid(self) -> int:
        return self.procs[-1].pid


@contextlib.contextmanager
def lab(log_dir: Path) -> Iterator[Lab]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        demo = subprocess.Popen(
            [sys.executable, "-m", "tests.security.demo_upstream", str(free_port())],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        procs.append(demo)
        assert demo.stdout is not None
        upstream = demo.stdout.readline().decode().split()[1]
        echo = subprocess.Popen(
            [sys.executable, "-m", "bench.upstreams", "modern", str(free_port()), str(free_port())],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        procs.append(echo)
        assert echo.stdout is not None
        modern = echo.stdout.readline().decode().strip()
        port = free_port()
        log = open(log_dir / "fuzz-gateway.log", "wb")  # noqa: SIM115 - the child keeps it
        gw = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gateway",
                "serve",
                "--listen",
                f"127.0.0.1:{port}",
                "--route",
                f"/mcp={upstream}",
                "--route",
                f"/m={modern}",
                "--log-level",
                "warning",
            ],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(gw)
        _wait_ready(port, gw)
        yield Lab(upstream, f"http://127.0.0.1:{port}", procs, modern)
    finally:
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


def _wait_ready(port: int, proc: subprocess.Popen[bytes], within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the gateway exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError("the gateway did not start")


# ------------------------------------------------------------------------ main


def run(messages: int, seed: int, log_dir: Path) -> dict[str, Any]:
    rng = random.Random(seed)
    problems: Counter[str] = Counter()
    examples: dict[str, str] = {}
    sent: Counter[str] = Counter()
    with lab(log_dir) as running:
        http_target = HttpTarget(running.gateway)
        http_target.open_sessions()
        stdio = StdioTarget(running.upstream)
        warm = messages // 20
        fds_before = rss_before = 0
        started = time.monotonic()
        try:
            for n in range(messages):
                if n == warm:  # after a warm-up: what the steady state holds
                    fds_before = open_fds(running.gateway_pid)
                    rss_before = rss_kib(running.gateway_pid)
                transport = "stdio" if n % 5 == 4 else "http"
                item = shape(rng)
                target = stdio if transport == "stdio" else http_target
                sent[transport] += 1
                wrong = target.send(item)
                if wrong is not None:
                    key = f"{transport}: {wrong.split(':')[0]}"
                    problems[key] += 1
                    examples.setdefault(key, f"{wrong[:200]} <- {item.body[:200]!r}")
        finally:
            http_target.close()
            stdio.close()
        elapsed = time.monotonic() - started
        fds_after = open_fds(running.gateway_pid)
        rss_after = rss_kib(running.gateway_pid)
    return {
        "messages": messages,
        "seed": seed,
        "sent": dict(sent),
        "seconds": round(elapsed, 1),
        "problems": dict(problems),
        "examples": examples,
        "gateway_fds": [fds_before, fds_after],
        "gateway_rss_kib": [rss_before, rss_after],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.fuzz", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    log_dir = Path(os.environ.get("TMPDIR", "/tmp"))
    report = run(args.messages, args.seed, log_dir)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{report['messages']} messages ({report['sent']}) in {report['seconds']} s, "
        f"seed {args.seed}"
    )
    print(f"problems: {report['problems'] or 'none'}")
    for key, example in report["examples"].items():
        print(f"  {key}: {example}")
    fds, rss = report["gateway_fds"], report["gateway_rss_kib"]
    print(f"gateway descriptors {fds[0]} -> {fds[1]}, RSS {rss[0]} -> {rss[1]} KiB")
    if report["problems"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
