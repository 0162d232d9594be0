"""Hostile upstream answers, generated, on every carrier: a Streamable HTTP answer's
status line, headers, length and body (JSON, SSE framing, arbitrary bytes); an
HTTP+SSE upstream's ``endpoint`` event and the framing of its answers on the stream; a
stdio upstream's answer line.  The upstreams are tests/security/hostile_upstream.py.

The property, for a 2026-07-28 client and a 2025-11-25 session client alike: the tool
call gets one answer within a bound, never an HTTP 500; a JSON-RPC answer carries the
call's id; every answer names a request id; and the gateway logs no traceback and no
error line (an upstream's nonsense is the upstream's fault, said as a warning).
"""

from __future__ import annotations

import http.client
import json
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.gateway_proc import RunningGateway, bad_log_lines, gateway
from tests.security.hostile_upstream import ID, HostileHttp

EXAMPLES = 80
# An HTTP+SSE example may wait out the route's timeout twice (the handshake, the call).
SSE_EXAMPLES = 40
# A stdio answer that never ends its line waits out the route's timeout.
STDIO_EXAMPLES = 40
ANSWER_WITHIN = 15.0
CALL_ID = 7
HOSTILE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@dataclass
class Lab:
    gateway: RunningGateway
    hostile: HostileHttp
    stdio_answer: Path
    # Each request id a client was given, with the status it came with.
    request_ids: list[tuple[str, int]] = field(default_factory=list)

    def unlogged(self) -> list[tuple[str, int]]:
        """The request ids clients were given that no log line names (yet)."""
        log = self.gateway.log()
        return [(rid, st) for rid, st in self.request_ids if f'"request_id": "{rid}"' not in log]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("hostile-upstreams")
    hostile = HostileHttp()
    url = hostile.start()
    answer = tmp / "stdio-answer"
    answer.write_bytes(b"\n")
    stdio = f"stdio:{sys.executable} -m tests.security.hostile_upstream {answer}"
    routes = (
        f"/h={url}/mcp,version=2025-11-25,transport=http,timeout=2",
        # Stateless: the pass-through lane's own (2026-07-28 clients) and translated
        # (2025-11-25 clients) calls, once the tool list was read.
        f"/m={url}/modern,version=2026-07-28,transport=http,timeout=2",
        f"/s={url}/sse,version=2024-11-05,transport=sse,timeout=1",
        f"/i={stdio},version=2025-11-25,shared=true,timeout=1",
        f"/j={stdio} --modern,version=2026-07-28,shared=true,timeout=1",
    )
    try:
        with gateway(*routes, tmp_path=tmp, check=False) as running:
            # Every route reached its upstream first: a route that cannot (a child never
            # started) would pass every example below with its refusals.
            with urllib.request.urlopen(running.url("/readyz"), timeout=30) as ready:
                routes_ready = json.loads(ready.read())["routes"]
            assert all(r["ready"] for r in routes_ready.values()), routes_ready
            lab = Lab(running, hostile, answer)
            yield lab
            deadline = time.monotonic() + 30  # the log is written as each call ends
            while lab.unlogged():
                assert time.monotonic() < deadline, f"no log line names {lab.unlogged()[:5]}"
                time.sleep(0.1)
            bad = bad_log_lines(running.log())
            assert bad == [], "\n".join(bad[:10])
    finally:
        hostile.stop()


def _post(
    lab: Lab, path: str, body: dict[str, Any], headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    port = int(lab.gateway.base.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=ANSWER_WITHIN)
    try:
        conn.request(
            "POST",
            path,
            body=json.dumps(body),
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                **headers,
            },
        )
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def _messages(headers: dict[str, str], data: bytes) -> list[Any]:
    if headers.get("content-type", "").startswith("text/event-stream"):
        lines = data.decode().replace("\r\n", "\n").split("\n")
        return [
            json.loads(line[5:]) for line in lines if line.startswith("data:") and line[5:].strip()
        ]
    return [json.loads(data)] if data else []


def _call(lab: Lab, path: str, revision: str) -> None:
    """One tool call as a client of ``revision``; asserts what the client is told."""
    call = {
        "jsonrpc": "2.0",
        "id": CALL_ID,
        "method": "tools/call",
        "params": {"name": "t", "arguments": {}},
    }
    if revision == "2026-07-28":
        call["params"]["_meta"] = MODERN_META
        headers = {"MCP-Protocol-Version": revision, "Mcp-Method": "tools/call", "Mcp-Name": "t"}
        _told(lab, *_post(lab, path, call, headers))
        return
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": revision,
            "capabilities": {},
            "clientInfo": {"name": "h", "version": "0"},
        },
    }
    status, headers, _ = _post(lab, path, init, {})
    assert status != 500
    session = headers.get("mcp-session-id")
    if status != 200 or session is None:
        return  # the upstream could not be reached: refused at the handshake
    ids = {"Mcp-Session-Id": session, "MCP-Protocol-Version": revision}
    _post(lab, path, {"jsonrpc": "2.0", "method": "notifications/initialized"}, ids)
    _told(lab, *_post(lab, path, call, ids))


def _told(lab: Lab, status: int, headers: dict[str, str], data: bytes) -> None:
    assert status != 500, data[:300]
    request_id = headers.get("x-request-id")
    assert request_id, headers
    if status in (200, 400, 404, 502, 503, 504) and data:
        replies = [m for m in _messages(headers, data) if "id" in m]
        assert [m["id"] for m in replies][-1:] == [CALL_ID], data[:300]
    # A call's line or a refusal's names it (checked at the end, as lines are written
    # when each answer ends).
    lab.request_ids.append((request_id, status))


status_lines = st.one_of(
    st.sampled_from(
        [
            b"HTTP/1.1 200 OK",
            b"HTTP/1.1 500 Oops",
            b"HTTP/1.1 502 X",
            b"HTTP/1.1 503 X",
            b"HTTP/1.1 401 X",
            b"HTTP/1.1 404 X",
            b"HTTP/1.1 302 Found",
            b"HTTP/1.1 999 X",
            b"HTTP/1.0 200",
            b"HTTP/2 200",
            b"garbage",
            b"",
        ]
    ),
    st.binary(max_size=20),
)
content_types = st.one_of(
    st.sampled_from([b"application/json", b"text/event-stream", b"text/html", b""]),
    st.binary(max_size=12),
)
json_value = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
reply_ids = st.sampled_from([ID, b"999", b'"7"', b"null", b"[7]", b"{}"])
json_bodies = st.one_of(
    st.builds(
        lambda rid, key, value: (
            b'{"jsonrpc":"2.0","id":'
            + rid
            + b',"'
            + key
            + b'":'
            + json.dumps(value).encode()
            + b"}"
        ),
        reply_ids,
        st.sampled_from([b"result", b"error", b"method"]),
        json_value,
    ),
    st.builds(
        lambda code, msg: (
            b'{"jsonrpc":"2.0","id":'
            + ID
            + b',"error":{"code":'
            + code
            + b',"message":'
            + msg
            + b"}}"
        ),
        st.sampled_from([b"-32603", b"1.5", b'"x"', b"null", b"99999999999999999999"]),
        st.sampled_from([b'"m"', b"1", b"null", b'"\\ud800"']),
    ),
    st.binary(max_size=60),
)
separators = st.sampled_from([b"\n", b"\r\n", b"\r", b"", b"\n\n"])
sse_fields = st.tuples(
    st.sampled_from(
        [b"event: message", b"event: x", b"data: ", b"id: \x00", b"retry: -1", b": c", b"data"]
    ),
    st.one_of(json_bodies, st.binary(max_size=20)),
    separators,
)
sse_bodies = st.lists(sse_fields, max_size=4).map(
    lambda fields: b"".join(a + b + c for a, b, c in fields)
)
lengths = st.sampled_from(["right", "none", "short", "long", "junk", "chunked", "badchunk"])
extra_headers = st.lists(
    st.tuples(
        st.sampled_from(
            [
                b"Mcp-Session-Id",
                b"Retry-After",
                b"Location",
                b"WWW-Authenticate",
                b"Content-Encoding",
                b"X",
            ]
        ),
        st.binary(max_size=16).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
    ),
    max_size=2,
)


def _frame(
    status: bytes, ctype: bytes, body: bytes, length: str, extra: list[tuple[bytes, bytes]]
) -> bytes:
    head = [status, b"Content-Type: " + ctype.replace(b"\r", b"").replace(b"\n", b"")]
    head += [name + b": " + value for name, value in extra]
    if length in ("chunked", "badchunk"):
        head.append(b"Transfer-Encoding: chunked")
        size = b"%x" % len(body) if length == "chunked" else b"zz"
        body = size + b"\r\n" + body + b"\r\n0\r\n\r\n"
    elif length != "none":
        value = {"right": len(body), "short": max(0, len(body) - 3), "long": len(body) + 50}.get(
            length
        )
        head.append(b"Content-Length: " + (str(value).encode() if value is not None else b"-x1"))
    return b"\r\n".join([*head, b"Connection: close", b"", b""]) + body


@pytest.mark.timeout(600)
@HOSTILE
@given(
    status=status_lines,
    ctype=content_types,
    body=st.one_of(json_bodies, sse_bodies),
    length=lengths,
    extra=extra_headers,
    revision=st.sampled_from(["2026-07-28", "2025-11-25"]),
    path=st.sampled_from(["/h", "/m"]),
)
def test_streamable_http_answers(
    lab: Lab,
    status: bytes,
    ctype: bytes,
    body: bytes,
    length: str,
    extra: list[tuple[bytes, bytes]],
    revision: str,
    path: str,
) -> None:
    """Before a handshake-era upstream (/h) and a stateless one (/m)."""
    lab.hostile.answer = _frame(status, ctype, body, length, extra)
    _call(lab, path, revision)


@pytest.mark.timeout(600)
@settings(HOSTILE, max_examples=SSE_EXAMPLES)
@given(
    endpoint=st.one_of(
        st.sampled_from(
            [
                b"/messages?session=1",
                b"//internal-db.example:99999/messages",
                b"http://127.0.0.1:99999/messages",
                b"http://other.example/messages",
                b"",
                b"/messages\x00",
                b"%%%",
                b"http://[::1/messages",
            ]
        ),
        st.binary(max_size=30).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
    ),
    framing=st.one_of(
        sse_bodies,
        json_bodies.map(
            lambda b: b"event: message\r\ndata: " + b.replace(b"\n", b"") + b"\r\n\r\n"
        ),
    ),
    # A 2026-07-28 client's call goes through a pooled upstream session (and may park).
    revision=st.sampled_from(["2026-07-28", "2025-11-25"]),
)
def test_http_sse_endpoint_events_and_framing(
    lab: Lab, endpoint: bytes, framing: bytes, revision: str
) -> None:
    lab.hostile.endpoint = endpoint
    lab.hostile.sse_answer = framing
    _call(lab, "/s", revision)


@pytest.mark.timeout(600)
@settings(HOSTILE, max_examples=STDIO_EXAMPLES)
@given(
    line=st.one_of(
        json_bodies.map(lambda b: b.replace(b"\n", b"") + b"\n"),
        st.binary(max_size=60),
        st.sampled_from(
            [b"\n", b"{", b'{"jsonrpc":"2.0","id":' + ID + b',"result":{}}', b"\xff\xfe\n"]
        ),
    ),
    revision=st.sampled_from(["2026-07-28", "2025-11-25"]),
    # A handshake-era server (/i) and a stateless one (/j).
    path=st.sampled_from(["/i", "/j"]),
)
def test_stdio_answer_lines(lab: Lab, line: bytes, revision: str, path: str) -> None:
    lab.stdio_answer.write_bytes(line)
    _call(lab, path, revision)
