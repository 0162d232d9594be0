"""ClusterNode.use_once, the sealer's ledger: a store that does not answer (down, or
its pool busy past its timeout) is a 503 to send again, never an exception of the
gateway's; logged once until the store answers again."""

from __future__ import annotations

import pytest
import structlog

from gateway.cluster.node import STORE_RETRY_AFTER, ClusterNode
from gateway.cluster.store import MemoryStore
from gateway.core import Failure, FailureKind


class FlakyStore(MemoryStore):
    """A memory store whose use_once raises while ``down`` (what redis-py raises when
    no pooled connection comes free in time)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True

    async def use_once(self, key: str, ttl: float) -> bool:
        if self.down:
            raise ConnectionError("No connection available.")
        return await super().use_once(key, ttl)


async def test_a_store_that_does_not_answer_refuses_the_retry_with_a_503() -> None:
    store = FlakyStore()
    node = ClusterNode(store, b"k" * 32, replica_id="aaa")
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            with pytest.raises(Failure) as raised:
                await node.use_once("digest", 30)
            failure = raised.value
            assert failure.kind is FailureKind.OVERLOADED
            assert "send the same request again" in failure.message
            assert failure.headers == {"Retry-After": str(STORE_RETRY_AFTER)}
            assert failure.data == {"retryAfterSeconds": STORE_RETRY_AFTER}
        store.down = False
        # Nothing was spent while the store was away: the same state goes now, once.
        assert await node.use_once("digest", 30)
        assert not await node.use_once("digest", 30)
    events = [(entry["log_level"], entry["event"]) for entry in logs]
    assert events == [
        (
            "warning",
            "cluster store unreachable or busy: retries and requests for other "
            "replicas refused (503)",
        ),
        ("info", "cluster store answers again: retries and relays accepted"),
    ]
