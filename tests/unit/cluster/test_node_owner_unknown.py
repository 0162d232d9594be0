"""ClusterNode's middleware when the owner of a request cannot be looked up (the
store down, or its pool busy past its timeout): the request is marked for the
transport to answer a 503 to send again, not answered as if its owner were gone;
logged once until the store answers again."""

from __future__ import annotations

from typing import Any

import structlog
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.bridge.state import StateSealer
from gateway.cluster.node import STORE_RETRY_AFTER, ClusterNode
from gateway.cluster.store import MemoryStore, Replica
from gateway.core import Failure, FailureKind
from gateway.transport.marks import OWNER_UNKNOWN

KEY = b"k" * 32


class FlakyStore(MemoryStore):
    """A memory store whose owner look-ups raise while ``down`` (what redis-py raises
    when no pooled connection comes free in time)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True

    async def replica(self, replica_id: str) -> Replica | None:
        if self.down:
            raise ConnectionError("No connection available.")
        return await super().replica(replica_id)


async def _through(node: ClusterNode, method: str, session_id: str) -> Any:
    """What the handler behind the middleware was handed as the request's mark."""
    seen: list[Any] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(request.get(OWNER_UNKNOWN))
        return web.Response(status=204)

    request = make_mocked_request(method, "/mcp", headers={"Mcp-Session-Id": session_id})
    response = await node.middleware(request, handler)
    assert response.status == 204
    (mark,) = seen
    return mark


async def test_an_owner_that_cannot_be_looked_up_is_a_503_to_send_again() -> None:
    store = FlakyStore()
    node = ClusterNode(store, KEY, replica_id="aaa")
    node.attach("/mcp", 1 << 20, StateSealer(KEY, owner="aaa"))
    with structlog.testing.capture_logs() as logs:
        for method in ("GET", "DELETE", "GET"):
            mark = await _through(node, method, "bbb.xyz")
            assert isinstance(mark, Failure)
            assert mark.kind is FailureKind.OVERLOADED
            assert "send the same request again" in mark.message
            assert mark.headers == {"Retry-After": str(STORE_RETRY_AFTER)}
            assert mark.data == {"retryAfterSeconds": STORE_RETRY_AFTER}
        # Its own sessions need no look-up: never marked.
        assert await _through(node, "GET", "aaa.xyz") is None
        store.down = False
        # The store answers: an owner it does not know is gone, answered here unmarked.
        assert await _through(node, "GET", "bbb.xyz") is None
    events = [(entry["log_level"], entry["event"]) for entry in logs]
    assert events == [
        (
            "warning",
            "cluster store unreachable or busy: retries and requests for other replicas "
            "refused (503)",
        ),
        ("info", "cluster store answers again: retries and relays accepted"),
    ]
