"""Change notifications, per-session log levels and upstream session expiry with a real
server: `@modelcontextprotocol/server-everything` behind `gateway serve`, pinned SDK
clients in front (see feeds.py for what the server sends and when).

- handshake-era clients (Python SDK 1.22.0, 2025-06-18): `resources/subscribe` + the GET
  stream; `logging/setLevel` per session; two at once through one gateway, with the same
  credentials or none;
- 2026-07-28 clients (Python SDK 2.3.0): `subscriptions/listen` and a per-request
  `logLevel`;
- the upstream restarted under a live client: its next call works, and its level and
  subscriptions hold in the new upstream session;
- client sessions ended → upstream sessions ended (the server refuses their ids after).
"""

from __future__ import annotations

import re
import shlex
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from peers.registry import peer, require_installed
from peers.thirdparty import SERVER_EVERYTHING, running_thirdparty
from peers.thirdparty import require_installed as require_thirdparty

from tests.e2e.gateway_proc import gateway
from tests.thirdparty.feeds import (
    GZIP_ARGS,
    LEGACY_CLIENT,
    LOG,
    MODERN_CLIENT,
    FeedsClient,
    Restartable,
    below,
    is_log,
    updated,
)

pytestmark = pytest.mark.interop

LIST_CHANGED = "notifications/resources/list_changed"
ACK = "Received Subscribe Resource request"
# server-everything's simulated log lines: "Debug-level message" ... but "Alert
# level-message" (its own spelling), one level drawn at random per tick.
SIMULATED = re.compile(r"\w+[- ]level[- ]message")
# A simulated log comes at once and then every 5 s, of a random level (5 in 8 pass
# `warning`): the bounded wait for the first one that passes.
SIMULATED_WAIT = 45.0
SESSION = re.compile(r"for session (\S+)")


@pytest.fixture(scope="module")
def everything_http() -> Iterator[str]:
    require_thirdparty(SERVER_EVERYTHING)
    with running_thirdparty(SERVER_EVERYTHING, "streamable-http") as url:
        assert isinstance(url, str)
        yield url


def route(upstream: str, url: str) -> str:
    if upstream == "stdio":
        return f"/mcp=stdio:{shlex.join(SERVER_EVERYTHING.argv('stdio'))},timeout=20"
    return f"/mcp={url},timeout=20"


def python(name: str) -> str:
    client = peer(name)
    require_installed(client)
    return client.argv[0]


def session_of(text: str) -> str:
    """The upstream session a server-everything toggle names ("undefined" on stdio)."""
    match = SESSION.search(text)
    assert match is not None, text
    return match.group(1)


@pytest.mark.parametrize("credentials", ["same-credentials", "no-credentials"])
@pytest.mark.parametrize("upstream", ["streamable-http", "stdio"])
def test_two_legacy_clients_get_their_own_updates_and_logs(
    everything_http: str, tmp_path: Path, upstream: str, credentials: str
) -> None:
    """Client A at `info`, B at `warning`, each subscribed to its own URI, at once
    through one gateway: each gets the updates of its URI only, A the server's
    `info` acknowledgement of its subscribe and B none, list_changed only where its
    own session registered a resource, and simulated logs of its own session only, at
    or above its own level."""
    py = python(LEGACY_CLIENT)
    auth = "Bearer feeds-shared-token" if credentials == "same-credentials" else ""
    with (
        gateway(route(upstream, everything_http), tmp_path=tmp_path) as gw,
        FeedsClient(py, gw.url("/mcp"), "legacy", auth) as a,
        FeedsClient(py, gw.url("/mcp"), "legacy", auth) as b,
    ):
        uris = {"a": "demo://feeds/a", "b": "demo://feeds/b"}
        levels = {"a": "info", "b": "warning"}
        clients = {"a": a, "b": b}
        for name, client in clients.items():
            client.do("level", level=levels[name])
            client.do("subscribe", uri=uris[name])
        sessions = {
            name: session_of(client.do("call", name="toggle-subscriber-updates")["text"])
            for name, client in clients.items()
        }
        for name, client in clients.items():
            client.wait(updated(uris[name]))  # also the fence for what came before
        a.wait(is_log(f"URI: {uris['a']}"))
        assert not [e for e in b.logs() if ACK in str(e["data"])], b.report()  # info < warning
        # list_changed: A's session registers a resource; B's does not.
        a.do("call", name="gzip-file-as-resource", args=GZIP_ARGS)
        a.wait(lambda e: e.get("event") == LIST_CHANGED)
        # Simulated logs of each session, at or above its level.
        for client in clients.values():
            client.do("call", name="toggle-simulated-logging")
        for client in clients.values():
            client.wait(is_log(SIMULATED), SIMULATED_WAIT)
        for name, client in clients.items():
            other = "b" if name == "a" else "a"
            logs = client.logs()
            assert not below(levels[name], logs), client.report()
            if name == "b":
                assert not client.of(LIST_CHANGED), client.report()
            foreign = [e for e in client.events if uris[other] in str(e)]
            assert not foreign, client.report()
            if upstream != "stdio":  # over stdio the server has no session ids to name
                assert sessions["a"] != sessions["b"]
                simulated = [e for e in logs if SIMULATED.search(str(e["data"]))]
                assert all(sessions[name] in str(e["data"]) for e in simulated), client.report()


@pytest.mark.parametrize("upstream", ["streamable-http", "stdio"])
def test_modern_clients_listen_and_log_per_request(
    everything_http: str, tmp_path: Path, upstream: str
) -> None:
    """Two 2026-07-28 clients (one pooled upstream session between them): each listen
    hears the updates of its own URIs only and the resource list change; a call's
    logs reach that call only, at or above its `logLevel`."""
    py = python(MODERN_CLIENT)
    with (
        gateway(route(upstream, everything_http), tmp_path=tmp_path) as gw,
        FeedsClient(py, gw.url("/mcp"), "modern") as m1,
        FeedsClient(py, gw.url("/mcp"), "modern") as m2,
    ):
        m1.do("listen", uris=["demo://feeds/m1"], lists=True)
        m2.do("listen", uris=["demo://feeds/m2"], lists=True)
        m1.do("call", name="toggle-subscriber-updates")
        m1.wait(lambda e: e.get("listen") == "ResourceUpdated" and e["uri"].endswith("m1"))
        m2.wait(lambda e: e.get("listen") == "ResourceUpdated" and e["uri"].endswith("m2"))
        m2.do("call", name="gzip-file-as-resource", args=GZIP_ARGS)
        for client in (m1, m2):
            client.wait(lambda e: e.get("listen") == "ResourcesListChanged")
        # Logs: one every 5 s from now; a 6 s call at `debug` spans a tick and gets it,
        # a quiet client gets nothing, a 6 s call at `error` gets only error and above.
        m1.do("call", name="toggle-simulated-logging", log_level="debug")
        slow = {"duration": 6, "steps": 2}
        m1.do("call", name="trigger-long-running-operation", args=slow, log_level="debug")
        assert [e for e in m1.logs() if SIMULATED.search(str(e["data"]))], m1.report()
        assert not m2.logs(), m2.report()
        m1_before = len(m1.logs())
        m2.do("call", name="trigger-long-running-operation", args=slow, log_level="error")
        assert not below("error", m2.logs()), m2.report()
        assert len(m1.logs()) == m1_before, m1.report()  # not in a call: nothing for m1
        for client, other in ((m1, "m2"), (m2, "m1")):
            assert not [e for e in client.events if f"demo://feeds/{other}" in str(e)]


def test_restarted_upstream_gets_the_level_and_subscriptions_again(tmp_path: Path) -> None:
    """server-everything restarted (all its sessions gone) under a live client: the
    client's next call succeeds through a new upstream session, which is subscribed
    to the client's URI and set to its level again."""
    require_thirdparty(SERVER_EVERYTHING)
    py = python(LEGACY_CLIENT)
    with (
        Restartable(SERVER_EVERYTHING, tmp_path) as server,
        gateway(route("streamable-http", server.url), tmp_path=tmp_path) as gw,
        FeedsClient(py, gw.url("/mcp"), "legacy") as client,
    ):
        client.do("level", level="warning")
        client.do("subscribe", uri="demo://feeds/kept")
        before = session_of(client.do("call", name="toggle-subscriber-updates")["text"])
        client.wait(updated("demo://feeds/kept"))
        server.stop()
        server.start()
        client.events.clear()
        assert client.do("call", name="echo", args={"message": "hi"})["text"] == "Echo: hi"
        client.do("subscribe", uri="demo://feeds/new")  # its info ack must not come
        after = session_of(client.do("call", name="toggle-subscriber-updates")["text"])
        assert after != before  # a new upstream session
        client.wait(updated("demo://feeds/kept"))  # re-subscribed by the gateway
        client.wait(updated("demo://feeds/new"))  # the fence for the ack
        assert not [e for e in client.logs() if ACK in str(e["data"])], client.report()
        client.do("call", name="toggle-simulated-logging")
        client.wait(is_log(SIMULATED), SIMULATED_WAIT)
        assert not below("warning", client.logs()), client.report()
        assert all(after in str(e["data"]) for e in client.logs()), client.report()
        assert [e for e in client.events if e.get("event") == LOG]


SESSIONS = 5


def refused(url: str, session_id: str) -> bool:
    """Does the server refuse this session id now (it ended, or it never was)?"""
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": session_id,
        "Mcp-Protocol-Version": "2025-06-18",
    }
    request = urllib.request.Request(url, body, headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status != 200
    except urllib.error.HTTPError as exc:
        return exc.code in (400, 404)


def test_each_ended_client_session_ends_its_upstream_session(tmp_path: Path) -> None:
    """N client sessions opened, used and closed: N upstream sessions were opened (and
    the era probe's one), each ended: the server logs as many terminations and refuses
    every one of those session ids afterwards."""
    require_thirdparty(SERVER_EVERYTHING)
    py = python(LEGACY_CLIENT)
    with (
        Restartable(SERVER_EVERYTHING, tmp_path) as server,
        gateway(route("streamable-http", server.url), tmp_path=tmp_path) as gw,
    ):
        ids = []
        with ExitStack() as stack:
            for _ in range(SESSIONS):
                client = stack.enter_context(FeedsClient(py, gw.url("/mcp"), "legacy"))
                text = client.do("call", name="toggle-subscriber-updates")["text"]
                ids.append(session_of(text))
                assert not refused(server.url, ids[-1])  # alive while its client is
        assert len(set(ids)) == SESSIONS
        log = server.log_dir / f"everything-{server.port}-1.log"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            text = log.read_text()
            if text.count("Received session termination request") >= SESSIONS + 1:
                break
            time.sleep(0.1)  # polling, bounded by the deadline
        text = log.read_text()
        assert text.count("Session initialized with ID") == SESSIONS + 1, text[-3000:]
        assert text.count("Received session termination request") == SESSIONS + 1, text[-3000:]
        assert all(refused(server.url, sid) for sid in ids)
