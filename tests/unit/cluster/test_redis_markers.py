"""gateway/cluster/redis_markers.py: when a spent-state marker must be confirmed by a
replica of the store, and what the store does when none confirms it."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.cluster.redis_markers import Markers, Unconfirmed


class Primary:
    """A stand-in primary: how many replicas it has, and how many hold each write."""

    def __init__(self, attached: int | None, holding: int) -> None:
        self.attached = attached  # None: it is no longer the primary
        self.holding = holding
        self.keys: set[str] = set()
        self.waited: list[bool] = []
        self.moves = 0

    async def spend(self, markers: Markers, key: str) -> bool:
        async def write(confirm: bool) -> tuple[Any, Any]:
            self.waited.append(confirm)
            new = key not in self.keys
            self.keys.add(key)
            return new, self.holding if confirm else None

        async def replicas() -> int | None:
            return self.attached

        async def forget() -> None:
            self.keys.discard(key)

        async def moved() -> None:
            self.moves += 1

        return await markers.spend("p", write, replicas, forget, moved)


async def test_a_primary_with_a_replica_has_each_marker_confirmed() -> None:
    markers, primary = Markers(confirm=True), Primary(attached=1, holding=1)
    assert await primary.spend(markers, "a") is True
    assert await primary.spend(markers, "a") is False  # spent: a replay is refused
    assert primary.waited == [True, True]


async def test_a_stalled_replica_makes_each_round_a_send_again_and_keeps_no_marker() -> None:
    markers, primary = Markers(confirm=True), Primary(attached=1, holding=0)
    for _ in range(3):  # still attached: every marker keeps waiting for it
        with pytest.raises(Unconfirmed):
            await primary.spend(markers, "a")
        assert primary.keys == set()
    primary.holding = 1  # it answers again: the round sent again finishes
    assert await primary.spend(markers, "a") is True


async def test_a_primary_left_without_replicas_goes_on_alone() -> None:
    markers, primary = Markers(confirm=True), Primary(attached=1, holding=1)
    assert await primary.spend(markers, "a") is True
    primary.attached, primary.holding = 0, 0  # its replica died: none to wait for
    with pytest.raises(Unconfirmed):  # this round is sent again...
        await primary.spend(markers, "b")
    assert await primary.spend(markers, "b") is True  # ...and finishes, on one server
    assert primary.waited[-1] is False and primary.moves == 0


async def test_a_primary_that_is_no_longer_the_primary_takes_no_marker() -> None:
    markers, primary = Markers(confirm=True), Primary(attached=1, holding=1)
    assert await primary.spend(markers, "a") is True
    primary.attached, primary.holding = None, 0  # failed over: a stale primary
    with pytest.raises(Unconfirmed):
        await primary.spend(markers, "b")
    assert primary.moves == 1 and "b" not in primary.keys


async def test_without_confirmation_asked_for_no_marker_waits() -> None:
    markers, primary = Markers(confirm=False), Primary(attached=1, holding=0)
    assert await primary.spend(markers, "a") is True
    assert primary.waited == [False]


async def test_a_primary_never_seen_with_a_replica_is_not_waited_on() -> None:
    markers, primary = Markers(confirm=True), Primary(attached=0, holding=0)
    assert await primary.spend(markers, "a") is True
    assert primary.waited == [False]
