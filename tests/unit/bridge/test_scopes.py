"""The hub's book of listeners by scope: what a scope wants, kept as listeners change."""

from __future__ import annotations

from gateway.bridge.scopes import Scopes

TOOLS = "notifications/tools/list_changed"
PROMPTS = "notifications/prompts/list_changed"


def test_a_scope_wants_the_union_of_its_listeners() -> None:
    book = Scopes()
    book.add("alice", "s1", frozenset({TOOLS}), {"file:///a"})
    book.add("alice", "s2", frozenset({TOOLS, PROMPTS}), {"file:///a", "file:///b"})
    book.add("bob", "s3", frozenset({PROMPTS}), {"file:///c"})
    assert book.wanted("alice") == (frozenset({TOOLS, PROMPTS}), ["file:///a", "file:///b"])
    assert book.wanted("bob") == (frozenset({PROMPTS}), ["file:///c"])
    assert book.keys("alice") == ["s1", "s2"] and book.occupied("bob")

    book.remove("alice", "s2", frozenset({TOOLS, PROMPTS}), {"file:///a", "file:///b"})
    assert book.wanted("alice") == (frozenset({TOOLS}), ["file:///a"])  # s1's still
    book.remove("alice", "s1", frozenset({TOOLS}), {"file:///a"})
    assert book.wanted("alice") == (frozenset(), [])
    assert not book.occupied("alice") and book.keys("alice") == []
    assert book.occupied("bob")


def test_changes_of_one_listener_move_the_counts() -> None:
    book = Scopes()
    book.add("alice", "s1", frozenset(), set())
    book.add("alice", "s2", frozenset(), set())
    book.lists("alice", frozenset(), frozenset({TOOLS}))
    book.lists("alice", frozenset(), frozenset({TOOLS}))
    book.lists("alice", frozenset({TOOLS}), frozenset())  # one stream closed, one open
    assert book.wanted("alice")[0] == frozenset({TOOLS})
    book.lists("alice", frozenset({TOOLS}), frozenset())
    assert book.wanted("alice")[0] == frozenset()

    book.uri("alice", "file:///x", +1)
    book.uri("alice", "file:///x", +1)
    book.uri("alice", "file:///x", -1)
    assert book.wanted("alice")[1] == ["file:///x"]
    book.uri("alice", "file:///x", -1)
    assert book.wanted("alice")[1] == []


def test_nothing_is_kept_for_a_scope_nobody_is_in() -> None:
    book = Scopes()
    for n in range(100):
        book.add(f"p{n}", "s", frozenset({TOOLS}), {f"file:///{n}"})
        book.remove(f"p{n}", "s", frozenset({TOOLS}), {f"file:///{n}"})
    assert book.empty()
