"""Exposure rules: allow and deny lists of glob patterns, and their parse errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.policy import Rule, canonical_uri


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


def test_a_name_that_is_no_string_is_never_exposed() -> None:
    # Neither mode lets it through: a deny rule cannot tell what it names.
    for rule in ("allow:*", "deny:secret*", "deny:x"):
        for name in (None, 42, ["secret"], {"name": "secret"}):
            assert not Rule.parse(rule).allows(name), (rule, name)


SPELLINGS_OF_SECRET = [
    "file:///secret/key.txt",
    "file:///public/../secret/key.txt",
    "file:///public/%2e%2e/secret/key.txt",
    "file:///public/%2E%2E/secret/key.txt",
    "file:///./secret/key.txt",
    "file:///%73ecret/key.txt",
    "FILE:///secret/key.txt",
    "file://localhost/secret/key.txt",
    "file://LOCALHOST/secret/key.txt",
    "file:////secret/key.txt",
    "file:///secret//key.txt",
    " file:///secret/key.txt",
    "file:///secret/key.txt\t",
]
AMBIGUOUS = [
    "file:///secret%2Fkey.txt",
    "file:///secret%2fkey.txt",
    "file:///public\\..\\secret/key.txt",
    "file:///public/%5C../secret/key.txt",
    "file:///secret/key.txt\x00",
    "file:///sec\nret/key.txt",
    "file:///%FF/key.txt",
    "file://[::1/secret",
]


@pytest.mark.parametrize("uri", SPELLINGS_OF_SECRET + AMBIGUOUS)
def test_every_spelling_of_a_denied_resource_is_refused(uri: str) -> None:
    rule = Rule.parse("deny:file:///secret/*", canonical_uri)
    assert not rule.allows(uri)
    assert rule.allows("file:///public/readme.txt")


@pytest.mark.parametrize("uri", SPELLINGS_OF_SECRET + AMBIGUOUS)
def test_an_allow_list_cannot_be_escaped_by_another_spelling(uri: str) -> None:
    rule = Rule.parse("allow:file:///public/*", canonical_uri)
    assert not rule.allows(uri)
    assert rule.allows("file:///public/readme.txt")
    assert rule.allows("FILE://localhost/public/./a/../readme.txt")


def test_patterns_are_read_in_the_same_canonical_form() -> None:
    rule = Rule.parse("deny:FILE://localhost/%73ecret/*", canonical_uri)
    assert not rule.allows("file:///secret/key.txt")
    assert Rule.parse("allow:test://static-text", canonical_uri).allows("TEST://static-text")


@given(st.text())
def test_the_canonical_form_is_a_fixed_point(text: str) -> None:
    once = canonical_uri(text)
    if once is not None:
        assert canonical_uri(once) == once


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
