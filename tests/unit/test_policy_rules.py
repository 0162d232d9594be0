"""Exposure rules: allow and deny lists of glob patterns, and their parse errors."""

from __future__ import annotations

import pytest

from gateway.policy import Rule


def test_an_allow_list_exposes_only_what_matches() -> None:
    rule = Rule.parse("allow:search_*|read_file")
    assert rule.allows("search_docs")
    assert rule.allows("search_")
    assert rule.allows("read_file")
    assert not rule.allows("read_file2")  # the whole name must match
    assert not rule.allows("delete_all")
    assert not rule.allows("Search_docs")  # case matters


def test_a_deny_list_exposes_everything_else() -> None:
    rule = Rule.parse("deny:delete_*|drop?")
    assert not rule.allows("delete_user")
    assert not rule.allows("drops")
    assert rule.allows("drop")
    assert rule.allows("search")


def test_uri_patterns_and_sets() -> None:
    rule = Rule.parse("allow:file:///data/*|demo://items/{id}|demo://[ab]")
    assert rule.allows("file:///data/x/y.txt")  # `*` crosses slashes
    assert rule.allows("demo://items/{id}")
    assert rule.allows("demo://a")
    assert not rule.allows("demo://c")
    assert not rule.allows("file:///etc/passwd")


def test_a_name_that_is_no_string_matches_nothing() -> None:
    assert not Rule.parse("allow:*").allows(None)
    assert not Rule.parse("allow:*").allows(42)
    assert Rule.parse("deny:*").allows(None)


def test_regex_characters_in_patterns_are_literal() -> None:
    rule = Rule.parse("allow:a.b|c+d")
    assert rule.allows("a.b") and rule.allows("c+d")
    assert not rule.allows("axb") and not rule.allows("ccd")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("search_*", "allow:PATTERN"),
        ("permit:x", "allow:PATTERN"),
        ("allow:", "names no pattern"),
        ("deny: | ", "names no pattern"),
    ],
)
def test_bad_rules_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Rule.parse(text)


def test_a_rule_reads_back_as_written() -> None:
    assert str(Rule.parse("ALLOW: a | b ")) == "allow:a|b"
    assert Rule.parse("deny:x") == Rule("deny", ("x",))
