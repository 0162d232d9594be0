"""Questions a server asks its client (`Ask`) and the client's answers (`Answer`):
which client capability each needs, and what a server is told when its question
cannot reach the client (the spec's client sections: elicitation, sampling, roots)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import Answer, Ask, AskKind

FORM = Ask(AskKind.ELICIT, {"message": "name?", "requestedSchema": {}})
URL = Ask(AskKind.ELICIT, {"mode": "url", "message": "sign in", "url": "https://x"})
SAMPLE = Ask(AskKind.SAMPLE, {"messages": [], "maxTokens": 10})
SAMPLE_WITH_TOOLS = Ask(AskKind.SAMPLE, {"messages": [], "maxTokens": 10, "tools": [{}]})
ROOTS = Ask(AskKind.LIST_ROOTS, {})


def test_only_the_three_question_methods_are_questions() -> None:
    assert AskKind.for_method("elicitation/create") is AskKind.ELICIT
    assert AskKind.for_method("roots/list") is AskKind.LIST_ROOTS
    for other in ("tools/call", "", None, 5, ["roots/list"]):
        assert AskKind.for_method(other) is None  # type: ignore[arg-type]


def test_each_question_names_the_capability_it_needs() -> None:
    # A request without `mode` is form mode.
    assert FORM.capability() == {"elicitation": {"form": {}}}
    assert URL.capability() == {"elicitation": {"url": {}}}
    assert SAMPLE.capability() == {"sampling": {}}
    assert SAMPLE_WITH_TOOLS.capability() == {"sampling": {"tools": {}}}
    assert ROOTS.capability() == {"roots": {}}
    assert [a.method for a in (FORM, SAMPLE, ROOTS)] == [
        "elicitation/create",
        "sampling/createMessage",
        "roots/list",
    ]


@pytest.mark.parametrize(
    ("declared", "form", "url"),
    [
        ({}, False, False),
        ({"elicitation": True}, False, False),  # not an object: nothing declared
        ({"elicitation": {}}, True, False),  # an empty object means form only
        ({"elicitation": {"form": {}}}, True, False),
        ({"elicitation": {"url": {}}}, False, True),
        ({"elicitation": {"form": {}, "url": {}}}, True, True),
    ],
)
def test_elicitation_reaches_only_a_client_that_declared_its_mode(
    declared: dict[str, Any], form: bool, url: bool
) -> None:
    assert FORM.allowed_by(declared) is form
    assert Ask(AskKind.ELICIT, {"mode": "form"}).allowed_by(declared) is form
    assert URL.allowed_by(declared) is url


def test_sampling_with_tools_needs_the_tools_capability() -> None:
    assert not SAMPLE.allowed_by({})
    assert not SAMPLE.allowed_by({"sampling": True})
    assert SAMPLE.allowed_by({"sampling": {}})
    assert not SAMPLE_WITH_TOOLS.allowed_by({"sampling": {}})
    assert SAMPLE_WITH_TOOLS.allowed_by({"sampling": {"tools": {}}})
    # An empty tool list asks for no tools.
    assert Ask(AskKind.SAMPLE, {"tools": []}).allowed_by({"sampling": {}})


def test_roots_need_the_roots_capability() -> None:
    assert not ROOTS.allowed_by({})
    assert not ROOTS.allowed_by({"roots": None})
    assert ROOTS.allowed_by({"roots": {}})
    assert ROOTS.allowed_by({"roots": {"listChanged": True}})
    # Declaring one thing allows no other.
    assert not ROOTS.allowed_by({"sampling": {}, "elicitation": {}})
    assert not SAMPLE.allowed_by({"roots": {}, "elicitation": {}})


def test_an_answer_is_its_result_or_its_error() -> None:
    error = {"code": -1, "message": "User rejected sampling request"}
    assert Answer.from_response({"id": 1, "error": error}) == Answer(error=error)
    assert Answer.from_response({"id": 1, "result": {"action": "accept"}}) == Answer(
        result={"action": "accept"}
    )
    # A malformed result or error reads as an empty result, never as the junk.
    assert Answer.from_response({"id": 1, "result": "yes"}) == Answer(result={})
    assert Answer.from_response({"id": 1, "error": "no", "result": [1]}) == Answer(result={})


def test_a_question_that_cannot_reach_the_client_is_refused_as_the_spec_says() -> None:
    # Elicitation: the user dismissed it (cancel), not a protocol error.
    assert Answer.refusal(AskKind.ELICIT) == Answer(result={"action": "cancel"})
    # Sampling: the spec's "user rejected" error code; roots: method not found.
    sampling = Answer.refusal(AskKind.SAMPLE)
    roots = Answer.refusal(AskKind.LIST_ROOTS)
    assert sampling.result is None and roots.result is None
    assert sampling.error is not None and roots.error is not None
    assert sampling.error["code"] == -1
    assert roots.error["code"] == -32601
    assert sampling.error["message"] == "sampling is not available"
    assert roots.error["message"] == "roots are not available"
