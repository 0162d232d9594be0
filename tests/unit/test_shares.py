"""FairTable: a bounded table where the heaviest holder's oldest idle entry gives way
to a newcomer that holds less, and nobody gives way to a caller at its own bound."""

from __future__ import annotations

from gateway.core import FailureKind
from gateway.core.limits import FairTable


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
