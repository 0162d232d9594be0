"""core/limits.py: the nesting-depth bound, the descriptor budget, quotas (how
much one principal may hold of a thing, under a bound in all; over either,
refused, never by evicting anyone else's) and FairTable (the heaviest holder's
oldest idle entry gives way to a newcomer that holds less; nobody gives way to a
caller at its own bound)."""

from __future__ import annotations

import os
import resource
import sys
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.core import FailureKind
from gateway.core.limits import MAX_DEPTH, DescriptorBudget, FairTable, Quota, too_deep


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


# ------------------------------------------------------------------ quotas


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


# -------------------------------------------------------------- fair tables


class Entries:
    """The table under test, with what it ended and which entries are busy."""

    def __init__(self, total: int, per_owner: int) -> None:
        self.busy: set[str] = set()
        self.ended: list[str] = []
        self.table: FairTable[str] = FairTable(
            "things",
            total,
            per_owner,
            idle=lambda key: key not in self.busy,
            end=self.ended.append,
        )

    def put(self, owner: str, key: str) -> None:
        assert self.table.make_room(owner) is None, (owner, key)
        self.table.add(owner, key)


def test_room_while_not_full() -> None:
    entries = Entries(total=3, per_owner=3)
    entries.put("a", "a1")
    entries.put("b", "b1")
    assert entries.table.make_room("c") is None
    assert entries.ended == []


def test_a_full_table_ends_the_heaviest_holders_oldest_idle_entry() -> None:
    entries = Entries(total=4, per_owner=10)
    for key in ("m1", "m2", "m3"):
        entries.put("mallory", key)
    entries.put("alice", "a1")
    assert entries.table.make_room("bob") is None
    assert entries.ended == ["m1"]
    assert entries.table.held("mallory") == 2 and len(entries.table) == 3


def test_recent_use_protects_an_entry() -> None:
    entries = Entries(total=3, per_owner=10)
    for key in ("m1", "m2", "m3"):
        entries.put("mallory", key)
    entries.table.touch("m1")
    assert entries.table.make_room("bob") is None
    assert entries.ended == ["m2"]


def test_busy_entries_never_give_way_the_next_heaviest_does() -> None:
    entries = Entries(total=5, per_owner=10)
    for key in ("m1", "m2", "m3"):
        entries.put("mallory", key)
    entries.put("trudy", "t1")
    entries.put("trudy", "t2")
    entries.busy |= {"m1", "m2", "m3"}
    assert entries.table.make_room("bob") is None
    assert entries.ended == ["t1"]


def test_nobody_gives_way_to_a_caller_holding_as_much() -> None:
    entries = Entries(total=2, per_owner=10)
    entries.put("a", "a1")
    entries.put("b", "b1")
    assert entries.table.make_room("c") is None  # c holds 0 < 1: a's goes
    entries.table.add("c", "c1")
    refused = entries.table.make_room("c")  # c holds 1, nobody holds more
    assert refused is not None and refused.kind is FailureKind.OVERLOADED
    assert entries.ended == ["a1"]


def test_all_busy_refuses_and_ends_nothing() -> None:
    entries = Entries(total=2, per_owner=10)
    entries.put("m", "m1")
    entries.put("m", "m2")
    entries.busy |= {"m1", "m2"}
    refused = entries.table.make_room("bob")
    assert refused is not None and refused.kind is FailureKind.OVERLOADED
    assert entries.ended == [] and len(entries.table) == 2


def test_a_caller_at_its_own_bound_is_refused_and_ends_nothing() -> None:
    entries = Entries(total=10, per_owner=2)
    entries.put("a", "a1")
    entries.put("a", "a2")
    refused = entries.table.make_room("a")
    assert refused is not None and refused.kind is FailureKind.QUOTA_EXCEEDED
    assert entries.ended == []
    assert entries.table.oldest("a") == "a1"


def test_a_flood_of_principals_costs_the_flood() -> None:
    """Ten made-up principals fill the table; an innocent newcomer gets in each time,
    and the entries that go are the flood's, never the innocent's."""
    entries = Entries(total=100, per_owner=20)
    for n in range(100):
        entries.put(f"fake{n % 10}", f"f{n}")
    for n in range(5):
        entries.put("innocent", f"i{n}")
    assert entries.table.held("innocent") == 5
    assert all(key.startswith("f") for key in entries.ended)
    assert len(entries.table) == 100


def test_removed_entries_free_their_owner() -> None:
    entries = Entries(total=2, per_owner=2)
    entries.put("a", "a1")
    entries.table.remove("a1")
    entries.table.remove("a1")  # twice: no harm
    assert entries.table.held("a") == 0 and len(entries.table) == 0
    assert entries.table.oldest("a") is None


def test_refusals_say_which_table_and_which_bound() -> None:
    entries = Entries(total=2, per_owner=1)
    entries.put("a", "a1")
    own = entries.table.make_room("a")
    assert own is not None and own.kind is FailureKind.QUOTA_EXCEEDED
    assert own.data == {"quota": "things", "limit": 1}
    assert "things" in own.message and "1" in own.message
    entries.put("b", "b1")
    entries.busy |= {"a1", "b1"}
    full = entries.table.make_room("c")
    assert full is not None and full.kind is FailureKind.OVERLOADED
    assert full.data == {"quota": "things", "limit": 2}
    assert "things" in full.message and "2" in full.message


def test_an_owners_keys_are_listed_least_recently_used_first() -> None:
    entries = Entries(total=10, per_owner=10)
    for key in ("a1", "a2", "a3"):
        entries.put("a", key)
    entries.put("b", "b1")
    entries.table.touch("a1")
    entries.table.touch("nobody's")  # unknown: no harm
    assert entries.table.keys_of("a") == ["a2", "a3", "a1"]
    assert entries.table.keys_of("b") == ["b1"]
    assert entries.table.keys_of("c") == []


def test_keep_forgets_the_owners_own_oldest_never_anothers() -> None:
    """For what is only remembered (a task's target, its maker): a caller past its
    quota, or at a full table it cannot fairly take from, gives up its own oldest."""
    ended: list[str] = []
    table: FairTable[str] = FairTable(
        "tasks", total=4, per_owner=2, idle=lambda _: True, end=ended.append
    )
    table.keep("alice", "a1")
    table.keep("bob", "b1")
    for n in range(2, 6):
        table.keep("bob", f"b{n}")
    assert table.keys_of("alice") == ["a1"]  # bob's flood never reached alice's
    assert table.keys_of("bob") == ["b4", "b5"] and ended == ["b1", "b2", "b3"]
    table.keep("bob", "b4")  # again: used, not added
    assert table.keys_of("bob") == ["b5", "b4"]
    assert table.owner_of("a1") == "alice" and table.owner_of("b1") is None
