"""Shared pieces of the end-to-end tests against real, pinned SDK peers.

The upstreams are the official TypeScript SDK servers of tests/interop/peers/node
(`server_sdk1.mjs`: @modelcontextprotocol/sdk 1.32.2, 2025-11-25;
`server_sdk2.mjs`: @modelcontextprotocol/server 2.4.0, 2026-07-28), started with
`--e2e` (the test tools: concurrent asks, asks by declared capability, URL
elicitation, a call that waits for its cancellation) and `--tasks` (the SDK's
experimental tasks).  The clients are raw HTTP (tests/e2e/fake_client.py): the
SDK clients neither batch nor let a test drop a stream at a chosen moment.
"""

from __future__ import annotations

import contextlib
import shlex
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
from peers.registry import Peer, peer, require_installed, running_server

from tests.e2e.fake_client import (
    CAPS,
    INFO,
    MODERN,
    NEWEST_HANDSHAKE,
    PV,
    Reply,
    base_headers,
    initialize,
    modern_headers,
    notification,
    post,
    request,
    session_headers,
    text_of,
)
from tests.e2e.gateway_proc import RunningGateway, gateway

SDK1 = "node-sdk1-server"  # 2025-11-25
SDK2 = "node-sdk2-server"  # 2026-07-28

ADA = {"action": "accept", "content": {"name": "Ada"}}
SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "sampled words"},
    "model": "test-model",
    "stopReason": "endTurn",
}
ROOTS = {"roots": [{"uri": "file:///tmp/root-a", "name": "a"}]}
ALL_ASKS: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}


def sdk_peer(name: str, *args: str) -> Peer:
    """The registry's peer with the test tools switched on, failing by name if missing."""
    found = replace(peer(name), extra_args=("--e2e", *args))
    require_installed(found)
    return found


@contextlib.contextmanager
def gateway_before(
    server: Peer, tmp: Path, *, transport: str = "streamable-http", extra: tuple[str, ...] = ()
) -> Iterator[RunningGateway]:
    """`gateway serve` with one route, /mcp, to a running `server` (HTTP or stdio)."""
    with running_server(server, transport) as upstream:  # type: ignore[arg-type]
        if isinstance(upstream, list):
            route = "/mcp=stdio:" + shlex.join(upstream)
        else:
            route = f"/mcp={upstream}"
        with gateway(route, extra=extra, tmp_path=tmp) as running:
            yield running


def who() -> str:
    """A principal of its own for one test (the gateway pools upstream sessions by it)."""
    return f"Bearer t-{uuid.uuid4().hex[:12]}"


def modern_call(
    name: str,
    arguments: dict[str, Any],
    caps: dict[str, Any],
    *,
    responses: dict[str, Any] | None = None,
    state: str | None = None,
    id_: Any = 1,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    full_meta = {PV: MODERN, CAPS: caps, INFO: {"name": "e2e-sdk", "version": "0"}, **(meta or {})}
    params: dict[str, Any] = {"name": name, "arguments": arguments, "_meta": full_meta}
    if responses is not None:
        params["inputResponses"] = responses
    if state is not None:
        params["requestState"] = state
    return request(id_, "tools/call", params)


@dataclass
class ModernClient:
    """A 2026-07-28 client: every request a tools/call as one principal."""

    http: aiohttp.ClientSession
    url: str
    caps: dict[str, Any]
    auth: str

    async def call(self, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> Reply:
        headers = {**modern_headers("tools/call", name), "Authorization": self.auth}
        body = modern_call(name, arguments or {}, self.caps, **kw)
        return await post(self.http, self.url, body, headers, within=20.0)


def input_required(reply: Reply) -> tuple[dict[str, Any], str]:
    assert reply.status == 200, reply.text
    result = reply.result
    assert result.get("resultType") == "input_required", result
    return result["inputRequests"], result["requestState"]


def complete_text(reply: Reply) -> str:
    assert reply.status == 200, reply.text
    assert reply.result.get("resultType") == "complete", reply.result
    return text_of(reply.result)


def answer_for(method: str) -> dict[str, Any]:
    return {"elicitation/create": ADA, "sampling/createMessage": SAMPLED, "roots/list": ROOTS}[
        method
    ]


async def legacy_session(
    http: aiohttp.ClientSession,
    url: str,
    caps: dict[str, Any],
    auth: dict[str, str],
    version: str = NEWEST_HANDSHAKE,
) -> str:
    """initialize (declaring ``caps``) + initialized as a handshake-era client."""
    hello = initialize(0, version)
    hello["params"]["capabilities"] = caps
    reply = await post(http, url, hello, {**base_headers(), **auth})
    assert reply.status == 200, reply.text
    session = reply.session_id
    assert session, dict(reply.headers)
    done = await post(
        http,
        url,
        notification("notifications/initialized"),
        {**session_headers(session, version), **auth},
    )
    assert done.status == 202, done.text
    return session
