"""The README's curl calls, with the standard library: MCP requests to a gateway in
a container, and the ports they use."""

from __future__ import annotations

import base64
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from containers.common import HANDSHAKE, MODERN, Failed

# --- HTTP: the README's curl calls, with the standard library ------------------------


def post(url: str, body: Any, headers: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
    """POST JSON; the JSON answer (or the last message of an SSE answer)."""
    data = json.dumps(body).encode()
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    request = urllib.request.Request(url, data=data, headers={**base, **headers}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            status, text, got = response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        status, text, got = exc.code, exc.read().decode(errors="replace"), dict(exc.headers)
    if got.get("Content-Type", "").startswith("text/event-stream"):
        events = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        parsed = json.loads(events[-1]) if events else None
    else:
        parsed = json.loads(text) if text.strip() else None
    return status, parsed, got


def get_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def modern_call(url: str, id_: int, name: str, arguments: dict[str, Any], **extra: Any) -> Any:
    """A 2026-07-28 tools/call, as the README's quick start sends it."""
    params = {
        "name": name,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        },
        **extra,
    }
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}
    body = {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}
    status, answer, _ = post(url, body, headers)
    if status != 200:
        raise Failed(f"HTTP {status}: {answer}")
    return answer


def add_answers_5(url: str) -> bool:
    answer = modern_call(url, 1, "add", {"a": 2, "b": 3})
    result = answer.get("result", {})
    return bool(
        result.get("content") == [{"type": "text", "text": "5"}]
        and result.get("resultType") == "complete"
    )


def sealed_owner(state: str) -> str:
    """The replica claim of a sealed requestState (readable, not forgeable)."""
    payload = state.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims.get("o", "?"))


def at(url: str | Callable[[], str]) -> str:
    """A URL, or the next of several (one per call: replicas behind a Service)."""
    return url() if callable(url) else url


def greet_round(url: str | Callable[[], str], id_: int) -> str:
    """greet_me: input_required, then the retry with the answer; the parking replica."""
    first = modern_call(at(url), id_, "greet_me", {})["result"]
    if first.get("resultType") != "input_required":
        raise Failed(f"greet_me: expected input_required, got {first}")
    (key,) = first["inputRequests"]
    state = first["requestState"]
    answer = {key: {"action": "accept", "content": {"name": "Ada"}}}
    second = modern_call(
        at(url), id_ + 1, "greet_me", {}, requestState=state, inputResponses=answer
    )
    text = json.dumps(second.get("result", second))
    if "Hello, Ada!" not in text:
        raise Failed(f"greet_me retry: expected 'Hello, Ada!', got {second}")
    return sealed_owner(state)


def handshake_session(
    url: str | Callable[[], str], tool: str, arguments: dict[str, Any], expect: str
) -> str:
    """A 2025-11-25 client: initialize, initialized, tools/call; the session's id."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE,
            "capabilities": {},
            "clientInfo": {"name": "container-check", "version": "0"},
        },
    }
    status, answer, headers = post(at(url), init, {})
    session = headers.get("Mcp-Session-Id") or headers.get("mcp-session-id")
    if status != 200 or not session or answer["result"]["protocolVersion"] != HANDSHAKE:
        raise Failed(f"initialize: HTTP {status}, session {session!r}: {answer}")
    more = {"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    status, answer, _ = post(at(url), note, more)
    if status != 202:
        raise Failed(f"notifications/initialized: HTTP {status}: {answer}")
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    status, answer, _ = post(at(url), call, more)
    texts = [c.get("text") for c in (answer or {}).get("result", {}).get("content", [])]
    if status != 200 or expect not in texts:
        raise Failed(f"tools/call {tool}: HTTP {status}: {answer}")
    return session


# --- containers ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
