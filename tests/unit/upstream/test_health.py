"""gateway/upstream/health.py: ejection after failures in a row, back-off, trial."""

from __future__ import annotations

from gateway.core import Failure, FailureKind
from gateway.upstream.health import Health, Readmit, State, counts_against


def test_three_failures_in_a_row_eject_and_a_success_between_forgives() -> None:
    health = Health()
    health.failed(0.0, "refused")
    health.failed(0.0, "refused")
    health.succeeded(0.0)
    health.failed(0.0, "refused")
    health.failed(0.0, "refused")
    assert health.usable(0.0) and health.state is State.IN
    health.failed(1.0, "refused")
    assert health.state is State.OUT and not health.usable(1.5)
    assert health.retry_after(1.5) == 2  # out for 2 s from 1.0
    assert health.reason == "refused"


def test_back_off_doubles_until_a_success_and_a_trial_decides() -> None:
    health = Health(eject_after=1, base=2.0, ceiling=5.0)
    health.failed(0.0, "down")
    assert health.until == 2.0
    assert health.usable(2.0) and health.state is State.TRIAL
    health.failed(2.0, "down")  # a trial's failure: out again, for longer
    assert health.until == 6.0
    health.usable(6.0)
    health.failed(6.0, "down")
    assert health.until == 11.0  # the ceiling
    health.usable(11.0)
    health.succeeded(11.0)
    assert health.state is State.IN and health.ejections == 0
    health.failed(12.0, "down")
    assert health.until == 14.0  # from the base again
    assert health.ejected_total == 4


def test_a_check_that_finds_it_down_ejects_at_once() -> None:
    health = Health()
    health.failed(0.0, "no connection", at_once=True)
    assert health.state is State.OUT


def test_what_counts_against_a_target() -> None:
    assert counts_against(Failure(FailureKind.UPSTREAM_UNAVAILABLE, "refused"))
    assert counts_against(Failure(FailureKind.UPSTREAM_TIMEOUT, "slow"))
    assert counts_against(Failure(FailureKind.UPSTREAM_PROTOCOL, "x", {"status": 502}))
    assert not counts_against(Failure(FailureKind.UPSTREAM_PROTOCOL, "x", {"status": 413}))
    assert not counts_against(Failure(FailureKind.INVALID_PARAMS, "the client's"))
    assert not counts_against(Failure(FailureKind.UNAUTHORIZED, "credentials"))


def test_out_for_what_only_a_check_clears_no_call_goes_and_no_call_takes_it_back() -> None:
    """Another era: its back-off passing puts it on no trial for calls, and a call that
    succeeds (on a session pinned there, say) does not re-admit it; a check does."""
    health = Health(base=2.0)
    health.failed(0.0, "another era", at_once=True, readmit=Readmit.CHECK)
    assert health.state is State.OUT
    assert not health.usable(100.0) and health.state is State.OUT
    health.succeeded(100.0)  # a call's success
    assert health.state is State.OUT and health.reason == "another era"
    health.succeeded(101.0, Readmit.CHECK)
    assert health.state is State.IN and health.readmit is Readmit.ANY
    health.failed(102.0, "refused", at_once=True)  # an ordinary ejection: either success
    health.usable(104.0)
    health.succeeded(104.0)
    assert health.state is State.IN
