"""The nesting-depth bound, the descriptor budget and keyed principals."""

from __future__ import annotations

import os
import resource
import sys
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.bridge.principal import ANONYMOUS, Principals
from gateway.core.limits import MAX_DEPTH, DescriptorBudget, too_deep


def nested(depth: int) -> object:
    """``depth`` levels of containers (alternating objects and arrays) around a number."""
    value: object = 1
    for level in range(depth):
        value = [value] if level % 2 else {"a": value}
    return value


def test_depth_at_the_limit_is_accepted_and_one_more_refused() -> None:
    assert not too_deep(nested(MAX_DEPTH))
    assert too_deep(nested(MAX_DEPTH + 1))


def test_depth_far_beyond_the_recursion_limit_is_measured_without_recursion() -> None:
    assert too_deep(nested(sys.getrecursionlimit() * 4))


def test_scalars_and_flat_messages_are_not_deep() -> None:
    assert not too_deep(5)
    assert not too_deep({"jsonrpc": "2.0", "id": 1, "params": {"a": [1, 2, {"b": None}]}})


@given(st.recursive(st.integers(), lambda inner: st.lists(inner, max_size=3), max_leaves=30))
def test_depth_agrees_with_a_recursive_count(value: object) -> None:
    def depth(node: object) -> int:
        if isinstance(node, list):
            return 1 + max((depth(c) for c in node), default=0)
        return 0

    assert too_deep(value, 3) == (depth(value) > 3)


KEY = b"k" * 32


def test_the_budget_is_spent_when_only_the_reserve_is_left() -> None:
    limit = DescriptorBudget.limit()
    assert not DescriptorBudget(0).exhausted()  # no reserve: never refuses
    assert not DescriptorBudget(1).exhausted()  # this test holds far fewer than the limit
    assert DescriptorBudget(limit).exhausted()  # a reserve of every descriptor


def test_the_open_count_is_sampled_at_most_every_interval() -> None:
    budget = DescriptorBudget(1, interval=3600)
    first = budget.open_count()
    assert first == len(os.listdir("/proc/self/fd"))
    extra = [os.open(os.devnull, os.O_RDONLY) for _ in range(3)]
    try:
        assert budget.open_count() == first  # not sampled again within the hour
        assert DescriptorBudget(1, interval=0).open_count() >= first + 3
    finally:
        for fd in extra:
            os.close(fd)


def test_no_credentials_is_anonymous() -> None:
    assert Principals(KEY).of({}) == ANONYMOUS


def test_principals_are_keyed_and_never_the_token() -> None:
    headers = {"authorization": "Bearer secret-token"}
    one, other = Principals(KEY).of(headers), Principals(b"x" * 32).of(headers)
    assert one != other
    assert "secret-token" not in one
    assert one == Principals(KEY).of(dict(headers))


def test_one_token_is_one_caller_however_its_scheme_is_spelled() -> None:
    principals = Principals(KEY)
    one = principals.of({"authorization": "Bearer t"})
    for spelling in ("bearer t", "BEARER t", "bEaReR t", "Bearer  t", "Bearer\tt", " Bearer t "):
        assert principals.of({"authorization": spelling}) == one, spelling
    # The token itself is case-sensitive: another token is another caller.
    assert principals.of({"authorization": "Bearer T"}) != one
    assert principals.of({"authorization": "Basic t"}) != one


@given(st.text(min_size=1).filter(lambda t: t.strip() == t and " " not in t and t.isprintable()))
def test_the_scheme_is_case_folded_for_any_token(token: str) -> None:
    principals = Principals(KEY)
    assert principals.of({"authorization": f"BEARER {token}"}) == principals.of(
        {"authorization": f"bearer {token}"}
    )


def test_tenant_headers_are_part_of_the_principal() -> None:
    principals = Principals(KEY, tenant_headers=("X-Tenant",))
    token = {"authorization": "Bearer t"}
    a = principals.of({**token, "x-tenant": "a"})
    b = principals.of({**token, "x-tenant": "b"})
    assert a != b
    assert principals.of({"x-tenant": "a"}) != ANONYMOUS


def test_header_values_cannot_run_together() -> None:
    principals = Principals(KEY, tenant_headers=("x-tenant",))
    assert principals.of({"authorization": "ab", "x-tenant": "c"}) != principals.of(
        {"authorization": "a", "x-tenant": "bc"}
    )


def test_an_unlimited_descriptor_limit_counts_as_a_large_one(monkeypatch: Any) -> None:
    infinity = resource.RLIM_INFINITY
    monkeypatch.setattr(resource, "getrlimit", lambda which: (infinity, infinity))
    assert DescriptorBudget.limit() == 1 << 20
    assert not DescriptorBudget(8).exhausted()


def test_new_work_is_refused_once_only_the_reserve_is_left(monkeypatch: Any) -> None:
    """A limit of exactly what is open plus the reserve: spent; one more: not yet."""
    spare = {"n": 0}

    def limit_at_the_reserve(which: int) -> tuple[int, int]:
        return len(os.listdir("/proc/self/fd")) + spare["n"], resource.RLIM_INFINITY

    monkeypatch.setattr(resource, "getrlimit", limit_at_the_reserve)
    spare["n"] = 1
    assert DescriptorBudget(1).exhausted()
    spare["n"] = 2
    assert not DescriptorBudget(1).exhausted()
    spare["n"] = 0
    assert not DescriptorBudget(0).exhausted()  # no reserve: never refuses
