"""ClusterNode.here: the lean lane answers a POST itself only when the cluster
middleware would (nothing to verify, nothing another replica owns)."""

from __future__ import annotations

import orjson

from gateway.bridge.state import StateSealer
from gateway.cluster.node import ClusterNode
from gateway.cluster.relay import RELAY_HEADER
from gateway.cluster.store import MemoryStore
from gateway.core import Call, ClientContext, Operation

KEY = b"k" * 32


def _node() -> tuple[ClusterNode, StateSealer]:
    node = ClusterNode(MemoryStore(), KEY, replica_id="aaa")
    sealer = StateSealer(KEY)
    node.attach("/mcp", 1 << 20, sealer)
    return node, sealer


def _resuming(owner: str) -> bytes:
    """A retry carrying the requestState of a call parked on ``owner``."""
    sealer = StateSealer(KEY, owner=owner)
    call = Call(
        id=1,
        operation=Operation.for_method("tools/call"),
        method="tools/call",
        params={"name": "greet", "arguments": {}},
        client=ClientContext(protocol_version="2026-07-28"),
    )
    state = sealer.seal(call, "/mcp", "p", {"k": "parked", "i": "x", "n": 1})
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    message["params"] = {"name": "greet", "arguments": {}, "requestState": state}
    return orjson.dumps(message)


def test_new_work_and_own_sessions_are_answered_here() -> None:
    node, _ = _node()
    assert node.here("/mcp", {}, b"{}")
    assert node.here("/mcp", {"mcp-session-id": "aaa.xyz"}, b"{}")
    assert node.here("/mcp", {}, _resuming("aaa"))
    assert node.here("/other", {"mcp-session-id": "bbb.xyz"}, b"{}")  # no relaying there


def test_what_another_replica_owns_or_a_relay_goes_to_the_middleware() -> None:
    node, _ = _node()
    assert not node.here("/mcp", {"mcp-session-id": "bbb.xyz"}, b"{}")
    assert not node.here("/mcp", {}, _resuming("bbb"))
    assert not node.here("/mcp", {RELAY_HEADER.lower(): "sig"}, b"{}")


def test_a_draining_replica_leaves_new_work_to_the_middleware() -> None:
    node, _ = _node()
    node.draining = True
    assert not node.here("/mcp", {}, b"{}")
    assert node.here("/mcp", {"mcp-session-id": "aaa.xyz"}, b"{}")
