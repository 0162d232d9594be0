"""Quota: how much one principal may hold of a thing, under a bound in all; over
either, refused (never by evicting anyone else's)."""

from __future__ import annotations

from gateway.core import FailureKind
from gateway.core.limits import Quota


def test_a_principal_at_its_own_bound_is_refused_and_told_which_quota() -> None:
    quota = Quota("open streams", per_principal=2, total=10)
    assert quota.acquire("alice") is None
    assert quota.acquire("alice") is None
    refused = quota.acquire("alice")
    assert refused is not None and refused.kind is FailureKind.QUOTA_EXCEEDED
    assert refused.data == {"quota": "open streams", "limit": 2}
    assert "open streams" in refused.message and "2" in refused.message
    assert quota.held("alice") == 2 and len(quota) == 2  # nothing taken
    assert quota.acquire("bob") is None  # others are not held back


def test_the_bound_in_all_refuses_everyone_at_exactly_the_total() -> None:
    quota = Quota("calls in flight", per_principal=5, total=3)
    for who in ("a", "b", "c"):
        assert quota.refusal(who) is None
        quota.add(who)
    refused = quota.acquire("d")
    assert refused is not None and refused.kind is FailureKind.OVERLOADED
    assert refused.data == {"quota": "calls in flight", "limit": 3}
    assert "calls in flight" in refused.message
    assert len(quota) == 3 and quota.held("d") == 0
    quota.release("a")
    assert quota.acquire("d") is None


def test_add_counts_past_the_bounds_it_does_not_check() -> None:
    quota = Quota("things", per_principal=1, total=1)
    quota.add("a")
    quota.add("a")
    assert quota.held("a") == 2 and len(quota) == 2


def test_releasing_gives_back_one_and_nothing_below_zero() -> None:
    quota = Quota("things", per_principal=5, total=5)
    quota.release("nobody")  # holds nothing: no harm, no credit
    assert len(quota) == 0 and quota.held("nobody") == 0
    for _ in range(3):
        quota.add("a")
    quota.release("a")
    assert quota.held("a") == 2 and len(quota) == 2
    quota.release("a")
    quota.release("a")
    quota.release("a")
    assert quota.held("a") == 0 and len(quota) == 0
    # Credit was not kept: the bound still holds.
    for _ in range(5):
        assert quota.acquire("b") is None
    assert quota.acquire("b") is not None
