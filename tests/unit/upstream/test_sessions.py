"""SessionPool's bounds on shared (stateless clients') upstream sessions: per
principal, in all, and idle expiry.  Opening is replaced by a stand-in: what is
under test is which sessions the pool keeps, ends and refuses."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

from gateway.core import (
    Call,
    ClientContext,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    ServerProfile,
)
from gateway.protocol.selection import AdapterSet
from gateway.upstream import sessions as pool_module
from gateway.upstream.calls import Calls
from gateway.upstream.carriers.base import CarrierError
from gateway.upstream.sessions import SessionPool, UpstreamSession
from gateway.upstream.settings import UpstreamSettings

ADAPTER = AdapterSet.default().by_version["2025-11-25"]


class _Carrier:
    is_session = False

    async def terminate(self, headers: Any) -> None:
        return None

    async def close(self) -> None:
        return None


class Pool(SessionPool):
    """Opens stand-in sessions (no upstream); ``gate`` holds opens when set."""

    def __init__(self) -> None:
        carrier: Any = _Carrier()
        super().__init__(
            UpstreamSettings("http://127.0.0.1:9/mcp"),
            AdapterSet.default(),
            None,  # type: ignore[arg-type]
            (carrier, carrier),
            Calls(itertools.count(1)),
        )
        self.ended: list[str] = []
        self.gate: asyncio.Event | None = None

    async def open(self, *args: Any, **kwargs: Any) -> UpstreamSession:
        if self.gate is not None:
            await self.gate.wait()
        return UpstreamSession(ADAPTER, _Carrier(), None, profile=ServerProfile(), key=args[4])  # type: ignore[arg-type]

    async def end(self, key: str) -> bool:
        self.ended.append(key)
        return await super().end(key)


def exchange(principal: str) -> Exchange:
    call = Call(1, Operation.TOOLS_CALL, "tools/call", {}, ClientContext("2026-07-28"))
    return Exchange(call=call, route="/mcp", profile=ServerProfile(), principal=principal)


async def fill(pool: Pool, principal: str, count: int, start: int = 0) -> list[UpstreamSession]:
    return [
        await pool.get(f"p:{principal}:{n}", exchange(principal), "http", ADAPTER)
        for n in range(start, start + count)
    ]


def busy(session: UpstreamSession) -> None:
    session.inflight.calls[1] = (exchange(session.principal), 1)


async def test_a_principal_over_its_bound_ends_its_own_least_recently_used_idle_pool() -> None:
    pool = Pool()
    limit = pool_module.MAX_POOLS_PER_PRINCIPAL
    mine = await fill(pool, "alice", limit)
    await fill(pool, "bob", 2)
    await pool.get("p:alice:0", exchange("alice"), "http", ADAPTER)  # used again: not LRU
    await fill(pool, "alice", 1, start=limit)
    assert pool.ended == ["p:alice:1"]
    assert len(pool) == limit + 2
    for session in mine[2:]:
        busy(session)
    await fill(pool, "alice", 1, start=limit + 1)
    assert pool.ended[-1] == "p:alice:0"
    for session in pool._pools():
        if session.principal == "alice":
            busy(session)
    with pytest.raises(Failure) as refused:
        await fill(pool, "alice", 1, start=limit + 2)
    assert refused.value.kind is FailureKind.QUOTA_EXCEEDED
    assert not any(key.startswith("p:bob") for key in pool.ended)  # never another's


async def test_all_principals_together_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "MAX_POOLS", 4)
    pool = Pool()
    first = await fill(pool, "a", 1)
    await fill(pool, "b", 1)
    await fill(pool, "c", 2)
    await fill(pool, "d", 1)
    assert pool.ended == ["p:a:0"] and len(pool) == 4
    for session in pool._pools():
        busy(session)
    with pytest.raises(Failure) as refused:
        await fill(pool, "e", 1)
    assert refused.value.kind is FailureKind.OVERLOADED
    assert first[0].closed


async def test_concurrent_opens_do_not_overshoot_the_bound() -> None:
    pool = Pool()
    limit = pool_module.MAX_POOLS_PER_PRINCIPAL
    await fill(pool, "alice", limit - 1)
    pool.gate = asyncio.Event()
    opens = [
        asyncio.create_task(pool.get(f"p:alice:new{n}", exchange("alice"), "http", ADAPTER))
        for n in range(3)
    ]
    for _ in range(10):
        await asyncio.sleep(0)
    pool.gate.set()
    await asyncio.wait_for(asyncio.gather(*opens), 5)
    assert len([s for s in pool._pools() if s.principal == "alice"]) == limit


async def test_idle_pools_expire_and_busy_or_watched_ones_do_not() -> None:
    pool = Pool()
    idle, running, watched, _recent = await fill(pool, "alice", 4)
    busy(running)
    pool.watched = lambda key: key == watched.key
    now = time.monotonic()
    for session in (idle, running, watched):
        session.last_used = now - pool_module.POOL_IDLE - 1
    assert pool.expired(now) == [idle.key]
    await pool.close()


async def test_a_dropped_pools_log_level_is_forgotten_unless_it_comes_back() -> None:
    """A dropped pool keeps its level for its next call; one never opened again does
    not keep it for ever (a client session's level goes with its session)."""
    pool = Pool()
    (gone,) = await fill(pool, "alice", 1)
    (back,) = await fill(pool, "alice", 1, start=1)
    pool._levels.update({"p:alice:0": "debug", "p:alice:1": "info", "s:client": "error"})
    await pool.drop("p:alice:0", gone)
    pool._sweep()
    assert pool._levels == {"p:alice:1": "info", "s:client": "error"}
    assert back.key == "p:alice:1"


async def test_a_sweep_ends_many_expired_pools_a_few_at_a_time() -> None:
    """Thousands of pools expiring together must not open as many upstream
    connections at once (each end is a DELETE); and one used again while the
    sweep works through the rest is not ended."""
    pool = Pool()
    sessions = [(await fill(pool, f"p{n}", 1))[0] for n in range(40)]
    at_once = 0
    most = 0
    release = asyncio.Event()

    class Slow(_Carrier):
        async def terminate(self, headers: Any) -> None:
            nonlocal at_once, most
            at_once += 1
            most = max(most, at_once)
            await release.wait()
            at_once -= 1

    now = time.monotonic()
    for session in sessions:
        session.carrier = Slow()  # type: ignore[assignment]
        session.session_id = "upstream-id"
        session.last_used = now - pool_module.POOL_IDLE - 1
    pool._sweep()
    for _ in range(20):
        await asyncio.sleep(0)
    assert 0 < most <= pool_module.ENDING_AT_ONCE
    reused = sessions[-1]
    await pool.get(reused.key or "", exchange(reused.principal), "http", ADAPTER)  # used again
    release.set()
    await asyncio.wait_for(asyncio.gather(*pool._calls._background), 5)  # the sweep's work
    assert len(pool) == 1
    assert pool.find(reused.key or "") is reused and not reused.closed
    assert most <= pool_module.ENDING_AT_ONCE
    await pool.close()


def test_sessions_told_the_same_profile_share_one_copy() -> None:
    """Every session an upstream opens is told the same serverInfo and capabilities:
    thousands of sessions keep one copy, and a different answer is kept as told."""
    pool = Pool()
    info = {"name": "up", "version": "1"}
    first = pool._shared(ServerProfile(info=dict(info), capabilities={"tools": {}}))
    again = pool._shared(ServerProfile(info=dict(info), capabilities={"tools": {}}))
    assert again is first
    other = ServerProfile(info=dict(info), capabilities={"tools": {}, "logging": {}})
    assert pool._shared(other) is other


async def test_the_pool_counts_follow_every_way_a_session_comes_and_goes() -> None:
    """The bounds read counts kept as sessions come and go (not a walk over every
    session): whatever happens, they say what a walk would."""
    pool = Pool()

    def counted() -> None:
        pools = pool._pools()
        assert pool._counts.total == len(pools)
        for principal in {s.principal for s in pools} | {"a", "b", "c"}:
            assert pool._counts.held(principal) == sum(s.principal == principal for s in pools)

    a = await fill(pool, "a", 3)
    await fill(pool, "b", 2)
    counted()
    await pool.end(a[0].key or "")
    counted()
    await pool.drop(a[1].key or "", a[1])
    counted()
    await pool.drop("p:b:0", a[2])  # not the session under that key: nothing dropped
    counted()
    await fill(pool, "c", pool_module.MAX_POOLS_PER_PRINCIPAL + 1)  # one ended for room
    counted()
    await pool.close()
    assert pool._counts.total == 0 and pool._pools() == []


async def test_a_session_broken_by_the_set_level_before_a_call_leaves_that_call_unsent() -> None:
    """logging/setLevel goes before a stateless client's call on its pool; the session
    breaking there means the call was never sent (it may go on a new session), and
    the pool keeps the level it had."""
    pool = Pool()
    (session,) = await fill(pool, "alice", 1)
    session.log_level = "warning"

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise CarrierError("upstream closed the HTTP+SSE stream")

    pool._calls.handle = broken  # type: ignore[method-assign]
    with pytest.raises(CarrierError) as caught:
        await pool._set_level(session, "debug", exchange("alice"))
    assert caught.value.unreached and "setLevel" in str(caught.value)
    assert session.log_level == "warning"
