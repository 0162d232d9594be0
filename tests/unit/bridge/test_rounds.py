"""The parked call's state machine: only the moves its table allows."""

from __future__ import annotations

import pytest

from gateway.bridge.parked_calls import progress_as
from gateway.bridge.rounds import TRANSITIONS, IllegalMove, ParkedCall, ParkingTable, Phase
from gateway.core import Event

FINAL = {Phase.DONE, Phase.MISSING, Phase.RELEASED}


def test_a_round_trip_follows_the_table() -> None:
    parked = ParkedCall()
    assert parked.phase is Phase.RUNNING
    for phase in (Phase.GATHERING, Phase.PARKED, Phase.RUNNING, Phase.DONE):
        parked.move(phase)
    assert parked.over


@pytest.mark.parametrize("final", sorted(FINAL, key=lambda p: p.value))
def test_nothing_leaves_a_final_phase(final: Phase) -> None:
    assert TRANSITIONS[final] == frozenset()
    parked = ParkedCall(phase=final)
    assert parked.over
    for other in Phase:
        if other is not final:
            with pytest.raises(IllegalMove):
                parked.move(other)


def test_a_parked_call_is_resumed_or_released_never_done_behind_the_clients_back() -> None:
    assert TRANSITIONS[Phase.PARKED] == {Phase.RUNNING, Phase.RELEASED}
    parked = ParkedCall(phase=Phase.PARKED)
    with pytest.raises(IllegalMove):
        parked.move(Phase.DONE)
    with pytest.raises(IllegalMove):
        parked.move(Phase.GATHERING)


def test_only_a_running_call_gathers_and_only_a_gathering_call_parks() -> None:
    sources = {p for p, targets in TRANSITIONS.items() if Phase.GATHERING in targets}
    assert sources == {Phase.RUNNING}
    sources = {p for p, targets in TRANSITIONS.items() if Phase.PARKED in targets}
    assert sources == {Phase.GATHERING}
    with pytest.raises(IllegalMove):
        ParkedCall().move(Phase.PARKED)


async def test_a_resumed_calls_progress_is_told_as_the_open_requests() -> None:
    """Each retry carries a progress token of its own: the parked call's progress is
    told with it (with none, the retry asked for no progress), other events as they are."""
    seen: list[Event] = []

    async def emit(event: Event) -> None:
        seen.append(event)

    progress = Event("notifications/progress", {"progressToken": "first", "progress": 1})
    log = Event("notifications/message", {"level": "info", "data": "x"})
    for event in (progress, log):
        await progress_as(emit, "retry-token")(event)
        await progress_as(emit, None)(event)
    assert seen == [
        Event("notifications/progress", {"progressToken": "retry-token", "progress": 1}),
        log,
        log,
    ]


async def test_a_call_draws_its_name_only_when_kept_and_keeps_it() -> None:
    """Most calls end without a round: they never draw the unguessable name a sealed
    state carries (a system call each), and unparking one is a no-op.  A call kept in
    the table has one, the same every time it is read, and is found by it."""
    table = ParkingTable()
    quick = ParkedCall()
    table.unpark(quick)
    assert not quick.named
    kept = ParkedCall(phase=Phase.GATHERING)
    table.park(kept)
    assert kept.named and kept.id == kept.id and len(kept.id) >= 21
    assert table.get(kept.id) is kept
    assert ParkedCall().id != kept.id
    table.unpark(kept)
    assert table.get(kept.id) is None
