"""The parked call's state machine: only the moves its table allows."""

from __future__ import annotations

import pytest

from gateway.bridge.rounds import TRANSITIONS, IllegalMove, ParkedCall, Phase

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
