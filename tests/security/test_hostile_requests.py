"""Hostile request heads, generated: a header of the MCP endpoint, the ops endpoints or
the console, with a value of arbitrary bytes (non-UTF-8, Latin-1, surrogate-looking,
NUL, CR or LF), sent as raw bytes on a socket to a running gateway.

The property: every request gets exactly one answer, within a bound, and it is never
an HTTP 500; afterwards the gateway's log holds no traceback and no error line.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.console.conftest import console_port
from tests.e2e.fake_client import modern_request
from tests.e2e.gateway_proc import RunningGateway, bad_log_lines, gateway
from tests.security.harness import demo_upstream, modern_upstream

EXAMPLES = 250
ANSWER_WITHIN = 10.0
TOKEN = "hostile-requests-console-token-01234"
HOSTILE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
MCP_HEADERS = [
    "Authorization",
    "Mcp-Session-Id",
    "MCP-Protocol-Version",
    "Mcp-Method",
    "Mcp-Name",
    "Mcp-Param-A",
    "X-Request-Id",
    "traceparent",
    "tracestate",
    "baggage",
    "Origin",
    "Host",
    "Accept",
    "Content-Type",
    "Last-Event-ID",
    "Cookie",
    "Forwarded",
    "X-Forwarded-For",
    "X-Forwarded-Proto",
    "X-Forwarded-Host",
]
CONSOLE_HEADERS = ["Authorization", "X-Console-CSRF", "Host", "Origin", "Cookie", "Accept"]
value = st.one_of(
    st.binary(max_size=40),
    st.text(max_size=20).map(lambda t: t.encode("latin-1", "replace")),
    st.sampled_from(
        [
            b"Bearer \xff\xfe",
            b"Basic \xe9t\xe9",
            b"Basic " + base64.b64encode(b"op:\xff\xfe"),
            b"\xed\xa0\x80",
            b"2026-07-28\x00",
            b"tools/call",
            b"00-" + b"f" * 32 + b"-" + b"f" * 16 + b"-01",
        ]
    ),
)


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A handshake-era upstream (the demo) and a stateless one (2026-07-28 echo)."""
    with demo_upstream(tmp_path_factory.mktemp("demo")) as demo, modern_upstream() as modern:
        yield demo, modern


@pytest.fixture(scope="module")
def running(
    tmp_path_factory: pytest.TempPathFactory, upstreams: tuple[str, str]
) -> Iterator[RunningGateway]:
    tmp = tmp_path_factory.mktemp("hostile-requests")
    # A console rate no test reaches: each generated request reaches the handlers.
    env = {"GATEWAY_CONSOLE_TOKEN": TOKEN, "GATEWAY_CONSOLE_RATE": "100000"}
    extra = ("--console", "--console-listen", "127.0.0.1:0")
    demo, modern = upstreams
    routes = (f"/mcp={demo}", f"/m={modern}")
    with gateway(*routes, extra=extra, tmp_path=tmp, env=env, check=False) as started:
        yield started
        assert bad_log_lines(started.log()) == [], started.log()[-4000:]
        # Not vacuous: beside the hostile header, the call reached each route's tool.
        metrics = _metrics(int(started.base.rsplit(":", 1)[1]))
        for route in TOOLS:
            answered = f'method="tools/call",outcome="ok",route="{route}"'
            assert answered in metrics, (route, metrics[-3000:])


@pytest.fixture(scope="module")
def lane(
    tmp_path_factory: pytest.TempPathFactory, upstreams: tuple[str, str]
) -> Iterator[RunningGateway]:
    """The same routes with nothing that turns the pass-through lane off (no console)."""
    tmp = tmp_path_factory.mktemp("hostile-requests-lane")
    demo, modern = upstreams
    with gateway(f"/mcp={demo}", f"/m={modern}", tmp_path=tmp, check=False) as started:
        # The tool list read, so a call to /m with the usual headers takes the lane.
        port = int(started.base.rsplit(":", 1)[1])
        listing = json.dumps(modern_request(1, "tools/list")).encode()
        headers = [
            (b"Content-Type", b"application/json"),
            (b"Accept", b"application/json, text/event-stream"),
            (b"MCP-Protocol-Version", b"2026-07-28"),
            (b"Mcp-Method", b"tools/list"),
        ]
        assert _exchange(port, _head("POST", "/m", port, headers, len(listing)), listing) == 200
        yield started
        metrics = _metrics(port)
        assert 'gateway_pass_through_total{route="/m"}' in metrics, metrics[-2000:]
        assert bad_log_lines(started.log()) == [], started.log()[-4000:]


def _exchange(port: int, head: bytes, body: bytes = b"") -> int:
    """One raw request on its own connection; the answer's status (0: no status line
    but the connection closed, as a server may for a head it cannot parse)."""
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WITHIN) as sock:
        sock.sendall(head + body)
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                return 0
            data += chunk
    match = re.match(rb"HTTP/1\.[01] (\d{3})", data)
    assert match is not None, data[:200]
    return int(match.group(1))


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def _head(
    method: str, path: str, port: int, headers: list[tuple[bytes, bytes]], length: int
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1".encode(), f"Host: 127.0.0.1:{port}".encode()]
    lines += [name + b": " + value for name, value in headers]
    lines += [f"Content-Length: {length}".encode(), b"Connection: close", b"", b""]
    return b"\r\n".join(lines)


# Each route's tool, called as a 2026-07-28 client calls it.
TOOLS = {"/mcp": b"add", "/m": b"echo"}


def _modern_call(tool: bytes) -> bytes:
    """A well-formed call (a malformed one would be refused before any upstream work,
    and the hostile header would meet nothing but the decoder)."""
    arguments = {"a": 1, "b": 2, "text": "t"}
    params = {"name": tool.decode(), "arguments": arguments}
    return json.dumps(modern_request(7, "tools/call", params)).encode()


@HOSTILE
@given(
    name=st.sampled_from(MCP_HEADERS),
    hostile=value,
    method=st.sampled_from(["POST", "GET", "DELETE"]),
    path=st.sampled_from(sorted(TOOLS)),
    lane_on=st.booleans(),
)
def test_mcp_endpoint(
    running: RunningGateway,
    lane: RunningGateway,
    name: str,
    hostile: bytes,
    method: str,
    path: str,
    lane_on: bool,
) -> None:
    """Before a handshake-era (/mcp) and a stateless upstream (/m), through the full
    path (the console turns the lane off) and a gateway whose lane is on."""
    target = lane if lane_on else running
    port = int(target.base.rsplit(":", 1)[1])
    headers = [
        (b"Content-Type", b"application/json"),
        (b"Accept", b"application/json, text/event-stream"),
        (b"MCP-Protocol-Version", b"2026-07-28"),
        (b"Mcp-Method", b"tools/call"),
        (b"Mcp-Name", TOOLS[path]),
    ]
    headers = [(n, v) for n, v in headers if n.lower() != name.lower().encode()]
    headers.append((name.encode(), hostile))
    body = _modern_call(TOOLS[path]) if method == "POST" else b""
    status = _exchange(port, _head(method, path, port, headers, len(body)), body)
    assert status != 500


@HOSTILE
@given(
    name=st.sampled_from(["Host", "Origin", "Accept", "Authorization", "X-Request-Id"]),
    hostile=value,
    path=st.sampled_from(["/", "/healthz", "/readyz", "/metrics", "/nowhere"]),
)
def test_ops_endpoints(running: RunningGateway, name: str, hostile: bytes, path: str) -> None:
    port = int(running.base.rsplit(":", 1)[1])
    headers = [(name.encode(), hostile)]
    assert _exchange(port, _head("GET", path, port, headers, 0)) != 500


@HOSTILE
@given(
    name=st.sampled_from(CONSOLE_HEADERS),
    hostile=value,
    authorized=st.booleans(),
    target=st.sampled_from(
        [
            ("GET", "/routes"),
            ("GET", "/calls"),
            ("POST", "/calls/clear"),
            ("POST", "/playground/call"),
        ]
    ),
)
def test_console(
    running: RunningGateway, name: str, hostile: bytes, authorized: bool, target: tuple[str, str]
) -> None:
    port = console_port(running)
    headers = [(b"Authorization", f"Bearer {TOKEN}".encode())] if authorized else []
    headers = [(n, v) for n, v in headers if n.lower() != name.lower().encode()]
    headers.append((name.encode(), hostile))
    method, path = target
    status = _exchange(port, _head(method, path, port, headers, 0))
    assert status != 500


def test_the_console_is_not_locked_by_guesses(tmp_path: Path) -> None:
    """A burst of wrong tokens from one address costs that address, not the operator."""
    extra = ("--console", "--console-listen", "127.0.0.1:0")
    env = {"GATEWAY_CONSOLE_TOKEN": TOKEN}
    with gateway(extra=extra, tmp_path=tmp_path, env=env) as started:
        port = console_port(started)
        wrong = [(b"Authorization", b"Bearer wrong-guess")]
        statuses = [_exchange(port, _head("GET", "/routes", port, wrong, 0)) for _ in range(120)]
        assert statuses.count(429) > 60, statuses  # the guesses ran out of their budget
        right = [(b"Authorization", f"Bearer {TOKEN}".encode())]
        assert _exchange(port, _head("GET", "/routes", port, right, 0)) == 200


def test_a_malformed_header_is_not_logged(running: RunningGateway) -> None:
    """The HTTP parser's complaint quotes the bad header line: only its words are logged."""
    canary = b"CANARYHDR7Qz"
    for port in (int(running.base.rsplit(":", 1)[1]), console_port(running)):
        bad = [(b"Authorization", b"Bearer " + canary + b"\x01"), (b"Cookie", canary + b"\x00")]
        for header in bad:
            assert _exchange(port, _head("GET", "/routes", port, [header], 0)) == 400
    assert canary.decode() not in running.log()
