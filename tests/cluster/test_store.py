"""The stores one by one (in-process and directory), and the relay signature."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cluster import store as store_module
from gateway.cluster.filestore import FileStore
from gateway.cluster.owner import session_owner
from gateway.cluster.relay import relay_key, signature
from gateway.cluster.store import ClusterStore, MemoryStore, Replica


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ClusterStore:
    return MemoryStore() if request.param == "memory" else FileStore(tmp_path / "store")


async def test_registry_holds_live_replicas_only(store: ClusterStore) -> None:
    await store.register(Replica("a", "http://127.0.0.1:1"), 30)
    await store.register(Replica("b", "http://127.0.0.1:2", draining=True), 30)
    await store.register(Replica("c", "http://127.0.0.1:3"), -1)  # already expired
    assert await store.replica("a") == Replica("a", "http://127.0.0.1:1")
    assert await store.replica("c") is None
    assert {r.id for r in await store.replicas()} == {"a", "b"}
    await store.deregister("a")
    assert await store.replica("a") is None


async def test_use_once_is_once(store: ClusterStore) -> None:
    assert await store.use_once("digest", 30)
    assert not await store.use_once("digest", 30)
    assert await store.use_once("other", 30)


async def test_verdicts_round_trip(store: ClusterStore) -> None:
    assert await store.verdict("/mcp http://u") is None
    await store.put_verdict("/mcp http://u", {"revision": "r", "transport": "http"}, 30)
    assert await store.verdict("/mcp http://u") == {"revision": "r", "transport": "http"}


async def test_file_stores_on_one_directory_share_state(tmp_path: Path) -> None:
    one, two = FileStore(tmp_path), FileStore(tmp_path)
    await one.register(Replica("a", "http://x"), 30)
    assert await two.replica("a") == Replica("a", "http://x")
    assert await one.use_once("k", 30)
    assert not await two.use_once("k", 30)


def test_session_ids_name_their_owner() -> None:
    assert session_owner("abc123.Zr-_x") == "abc123"
    assert session_owner("no-owner-here") is None
    assert session_owner(None) is None


def test_the_relay_signature_covers_body_and_caller() -> None:
    key = relay_key(b"k" * 32)
    headers = {"Authorization": "Bearer a", "Mcp-Session-Id": "s", "Accept": "x"}
    base = signature(key, "POST", "/mcp", "1.0", "a", b"{}", headers)
    assert base == signature(key, "post", "/mcp", "1.0", "a", b"{}", {**headers, "Accept": "y"})
    assert base != signature(key, "POST", "/mcp", "1.0", "a", b"{ }", headers)
    assert base != signature(
        key, "POST", "/mcp", "1.0", "a", b"{}", {**headers, "Authorization": "b"}
    )
    assert base != signature(
        key, "POST", "/mcp", "1.0", "a", b"{}", {**headers, "Mcp-Session-Id": "t"}
    )
    assert base != signature(relay_key(b"j" * 32), "POST", "/mcp", "1.0", "a", b"{}", headers)


async def test_shared_results_expire_and_stay_bounded(store: ClusterStore) -> None:
    from gateway.cluster.store import MAX_RESULTS

    assert await store.result("k") is None
    await store.put_result("k", b'{"tools":[]}', 30)
    assert await store.result("k") == b'{"tools":[]}'
    await store.put_result("old", b"{}", -1)  # already expired
    assert await store.result("old") is None
    if isinstance(store, MemoryStore):
        for n in range(MAX_RESULTS + 5):
            await store.put_result(f"n{n}", b"{}", 30)
        assert len(store._results) <= MAX_RESULTS


async def test_the_memory_ledger_is_bounded_and_refuses_rather_than_forgets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Forgetting a spent state early would let it be replayed: a full ledger refuses
    new ones instead, and takes them again once old ones expire."""
    monkeypatch.setattr(store_module, "SWEEP_AT", 3)
    monkeypatch.setattr(store_module, "MAX_SPENT", 3)
    memory = MemoryStore()
    assert [await memory.use_once(k, 30) for k in ("a", "b", "c")] == [True] * 3
    assert not await memory.use_once("d", 30)  # full: refused, nothing forgotten
    assert not await memory.use_once("a", 30)  # still spent
    memory._used = {k: 0.0 for k in memory._used}  # all three expired
    assert await memory.use_once("d", 30)


def test_task_ids_name_their_owner() -> None:
    from gateway.cluster.owner import task_owner

    body = b'{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"gwtask.r1.up.7"}}'
    assert task_owner(body) == "r1"
    assert task_owner(b'{"method":"tasks/get","params":{"taskId":"task-1"}}') is None
    assert task_owner(b'[{"params":{"taskId":"gwtask.r2.x"}}]') == "r2"
    assert task_owner(b'{"params":{"taskId":"gwtask."}}') is None  # garbled: nobody's
    assert task_owner(b"gwtask. not JSON") is None
