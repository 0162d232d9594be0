"""gateway/cluster/redis_markers.py: when a spent-state marker must be confirmed by a
replica of the store, and what the store does when none confirms it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.cluster.redis_markers import Markers, Unconfirmed


class Primary:
    """A stand-in primary: its replicas, how many hold each write, whether a failover
    could still promote another server."""

    def __init__(self, attached: int | None, holding: int, *, alone: bool = True) -> None:
        self.attached = attached  # None: it is no longer the primary
        self.holding = holding
        self.is_alone = alone
        self.keys: dict[str, str] = {}
        self.waited: list[bool] = []
        self.moves = 0
        self.fail_wait: BaseException | None = None


class Marker:
    """One marker's store (the MarkerStore protocol) on a stand-in primary."""

    def __init__(self, primary: Primary, key: str, value: str) -> None:
        self.primary, self.key, self.value = primary, key, value

    async def write(self, confirm: bool) -> tuple[Any, Any]:
        primary = self.primary
        primary.waited.append(confirm)
        new = self.key not in primary.keys
        if new:
            primary.keys[self.key] = self.value
        if confirm and primary.fail_wait is not None:
            raise primary.fail_wait  # after the SET landed
        return new, primary.holding if confirm else None

    async def replicas(self) -> int | None:
        return self.primary.attached

    async def alone(self) -> bool:
        return self.primary.is_alone

    async def forget(self) -> None:  # only this call's own marker
        if self.primary.keys.get(self.key) == self.value:
            del self.primary.keys[self.key]

    async def moved(self) -> None:
        self.primary.moves += 1


async def spend(markers: Markers, primary: Primary, key: str, value: str = "v") -> bool:
    return await markers.spend("p", Marker(primary, key, value))


async def test_a_primary_with_a_replica_has_each_marker_confirmed() -> None:
    markers, primary = Markers(confirm=True), Primary(attached=1, holding=1)
    assert await spend(markers, primary, "a") is True
    assert await spend(markers, primary, "a", "w") is False  # spent: a replay is refused
    assert primary.waited == [True, True] and primary.keys == {"a": "v"}


async def test_a_stalled_replica_makes_each_round_a_send_again_and_keeps_no_marker() -> None:
    markers, primary = Markers(confirm=True), Primary(attached=1, holding=0)
    for _ in range(3):  # still attached: every marker keeps waiting for it
        with pytest.raises(Unconfirmed):
            await spend(markers, primary, "a")
        assert primary.keys == {}
    primary.holding = 1  # it answers again: the round sent again finishes
    assert await spend(markers, primary, "a") is True


async def test_a_primary_left_without_replicas_goes_on_alone_when_none_can_be_promoted() -> None:
    markers, primary = Markers(confirm=True), Primary(attached=1, holding=1)
    assert await spend(markers, primary, "a") is True
    primary.attached, primary.holding = 0, 0  # its replica died: none to wait for
    with pytest.raises(Unconfirmed):  # this round is sent again...
        await spend(markers, primary, "b")
    assert await spend(markers, primary, "b") is True  # ...and finishes, on one server
    assert primary.waited[-1] is False and primary.moves == 0


async def test_a_primary_cut_off_from_a_replica_that_may_be_promoted_takes_no_marker() -> None:
    """Its replica alive but cut off (a failover may yet promote it): going on alone
    would leave markers a failover wipes."""
    markers, primary = Markers(confirm=True), Primary(attached=1, holding=1)
    assert await spend(markers, primary, "a") is True
    primary.attached, primary.holding, primary.is_alone = 0, 0, False
    for key in ("b", "c"):
        with pytest.raises(Unconfirmed):
            await spend(markers, primary, key)
    assert set(primary.keys) == {"a"} and primary.waited[-1] is True
    primary.is_alone = True  # the replica is known dead now: on alone
    with pytest.raises(Unconfirmed):
        await spend(markers, primary, "b")
    assert await spend(markers, primary, "b") is True and primary.waited[-1] is False


async def test_a_primary_that_is_no_longer_the_primary_takes_no_marker() -> None:
    markers, primary = Markers(confirm=True), Primary(attached=1, holding=1)
    assert await spend(markers, primary, "a") is True
    primary.attached, primary.holding = None, 0  # failed over: a stale primary
    with pytest.raises(Unconfirmed):
        await spend(markers, primary, "b")
    assert primary.moves == 1 and "b" not in primary.keys
    markers_fresh, stale = Markers(confirm=True), Primary(attached=None, holding=0)
    with pytest.raises(Unconfirmed):  # never seen with a replica, and no longer primary
        await spend(markers_fresh, stale, "c")
    assert stale.keys == {} and stale.moves == 1


@pytest.mark.parametrize("failure", [ConnectionError("reset"), asyncio.CancelledError()])
async def test_a_write_that_fails_after_its_set_takes_back_only_its_own_marker(
    failure: BaseException,
) -> None:
    markers, primary = Markers(confirm=True), Primary(attached=1, holding=1)
    assert await spend(markers, primary, "old") is True  # a round spent earlier
    primary.fail_wait = failure
    with pytest.raises(type(failure)):
        await spend(markers, primary, "new", "mine")
    assert "new" not in primary.keys  # the client sends it again: not refused as spent
    with pytest.raises(type(failure)):
        await spend(markers, primary, "old", "replay")  # a replay's SET did not land
    assert primary.keys["old"] == "v"  # the earlier use's marker stays


async def test_without_confirmation_asked_for_no_marker_waits() -> None:
    markers, primary = Markers(confirm=False), Primary(attached=1, holding=0)
    assert await spend(markers, primary, "a") is True
    assert primary.waited == [False]


async def test_a_primary_never_seen_with_a_replica_is_not_waited_on() -> None:
    markers, primary = Markers(confirm=True), Primary(attached=0, holding=0)
    assert await spend(markers, primary, "a") is True
    assert primary.waited == [False]
