"""Server-role encode, per revision: the questions an upstream asks, pushed to a client
or refused for their shape."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import (
    Ask,
    AskKind,
    Call,
    ClientContext,
    FailureKind,
    InputRequired,
    Operation,
    Preamble,
    ServerProfile,
    Value,
)
from gateway.protocol.adapter import ANSWERS_ARGUMENT, STATE_ARGUMENT
from gateway.protocol.selection import AdapterSet
from tests.unit.protocol.adapter.test_server_encode import (
    MODERN,
    NEEDS,
    ROOTS,
    VERSIONS,
    adapter,
    encode,
)

# --------------------------------------------------------------- pushed asks

PUSHABLE: dict[str, set[AskKind]] = {
    "2024-11-05": {AskKind.SAMPLE, AskKind.LIST_ROOTS},
    "2025-03-26": {AskKind.SAMPLE, AskKind.LIST_ROOTS},
    "2025-06-18": set(AskKind),
    "2025-11-25": set(AskKind),
    MODERN: set(),
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", list(AskKind), ids=lambda k: k.value)
def test_pushable_asks(version: str, kind: AskKind) -> None:
    params: dict[str, Any] = {"message": "m"} if kind is AskKind.ELICIT else {}
    message = adapter(version).encode_ask(Ask(kind, params), "srv-1")
    if kind in PUSHABLE[version]:
        assert message is not None
        assert message["id"] == "srv-1"
        assert message["method"] == kind.method
        assert message["jsonrpc"] == "2.0"
    else:
        assert message is None


NEW_SCHEMA = {
    "type": "object",
    "properties": {
        "color": {
            "type": "string",
            "title": "Colour",
            "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}],
            "default": "r",
        },
        "plain": {"type": "string", "enum": ["a", "b"], "default": "a"},
        "count": {"type": "integer", "default": 3, "minimum": 0},
        "ok": {"type": "boolean", "default": True},
    },
    "required": ["color"],
}


def test_2025_06_18_flattens_elicitation_schemas() -> None:
    ask = Ask(AskKind.ELICIT, {"mode": "form", "message": "pick", "requestedSchema": NEW_SCHEMA})
    message = adapter("2025-06-18").encode_ask(ask, 1)
    assert message is not None
    params = message["params"]
    assert "mode" not in params
    assert params["message"] == "pick"
    schema = params["requestedSchema"]
    assert schema["required"] == ["color"]
    props = schema["properties"]
    assert props["color"] == {
        "type": "string",
        "title": "Colour",
        "enum": ["r", "g"],
        "enumNames": ["Red", "Green"],
    }
    assert props["plain"] == {"type": "string", "enum": ["a", "b"]}
    assert props["count"] == {"type": "integer", "minimum": 0}
    assert props["ok"] == {"type": "boolean", "default": True}
    assert ask.params["requestedSchema"] == NEW_SCHEMA  # untouched


# The schema `@modelcontextprotocol/server-everything` 2026.8.31 sends (its
# trigger-elicitation-request tool), abridged: every 2025-11-25 field kind.
EVERYTHING_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "name": {"title": "String", "type": "string", "description": "Your name"},
        "firstLine": {"type": "string", "default": "It was a dark and stormy night."},
        "email": {"type": "string", "format": "email", "minLength": 3},
        "integer": {"type": "integer", "minimum": 1, "maximum": 100, "default": 42},
        "number": {"type": "number", "default": 3.14},
        "check": {"type": "boolean", "default": False},
        "untitled": {"type": "string", "enum": ["Monica", "Ross"], "default": "Monica"},
        "untitledMulti": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "enum": ["Guitar", "Piano"]},
            "default": ["Guitar"],
        },
        "titled": {
            "type": "string",
            "title": "Hero",
            "oneOf": [{"const": "hero-1", "title": "Superman"}, {"const": "hero-2"}],
            "default": "hero-1",
        },
        "titledMulti": {
            "type": "array",
            "items": {"anyOf": [{"const": "fish-1", "title": "Tuna"}]},
            "default": ["fish-1"],
        },
        "legacy": {
            "type": "string",
            "enum": ["pet-1", "pet-2"],
            "enumNames": ["Cats", "Dogs"],
            "default": "pet-1",
        },
    },
    "required": ["name", "titled"],
}


def test_2025_06_18_projects_a_2025_11_25_schema_onto_its_own() -> None:
    ask = Ask(AskKind.ELICIT, {"message": "m", "requestedSchema": EVERYTHING_SCHEMA})
    v0618 = adapter("2025-06-18")
    assert v0618.refuse_ask(ask) is None  # only optional fields are lost
    message = v0618.encode_ask(ask, 1)
    assert message is not None
    schema = message["params"]["requestedSchema"]
    assert schema == {
        "type": "object",
        "properties": {
            "name": {"title": "String", "type": "string", "description": "Your name"},
            "firstLine": {"type": "string"},
            "email": {"type": "string", "format": "email", "minLength": 3},
            "integer": {"type": "integer", "minimum": 1, "maximum": 100},
            "number": {"type": "number"},
            "check": {"type": "boolean", "default": False},
            "untitled": {"type": "string", "enum": ["Monica", "Ross"]},
            "titled": {
                "type": "string",
                "title": "Hero",
                "enum": ["hero-1", "hero-2"],
                "enumNames": ["Superman", "hero-2"],
            },
            "legacy": {"type": "string", "enum": ["pet-1", "pet-2"], "enumNames": ["Cats", "Dogs"]},
        },
        "required": ["name", "titled"],
    }


@pytest.mark.parametrize("field", ["untitledMulti", "titledMulti"])
def test_2025_06_18_refuses_an_ask_whose_required_field_it_cannot_express(field: str) -> None:
    schema = {**EVERYTHING_SCHEMA, "required": ["name", field]}
    ask = Ask(AskKind.ELICIT, {"message": "m", "requestedSchema": schema})
    answer = adapter("2025-06-18").refuse_ask(ask)
    assert answer is not None and answer.result is None
    assert answer.error is not None
    assert answer.error["code"] == -32602
    assert field in answer.error["message"] and "2025-06-18" in answer.error["message"]
    # The server hears it as an error response to its elicitation/create.
    reply = adapter("2025-06-18").client_answer(9, answer)
    assert reply["error"]["code"] == -32602 and reply["id"] == 9


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_later_revisions_keep_2025_11_25_schemas(version: str) -> None:
    schema = {**EVERYTHING_SCHEMA, "required": ["name", "titledMulti"]}
    ask = Ask(AskKind.ELICIT, {"mode": "form", "message": "m", "requestedSchema": schema})
    assert adapter(version).refuse_ask(ask) is None
    assert adapter(version).project_ask_params(ask)["requestedSchema"] == schema


@pytest.mark.parametrize("version", VERSIONS)
def test_sampling_and_roots_are_never_refused_for_their_shape(version: str) -> None:
    for kind in (AskKind.SAMPLE, AskKind.LIST_ROOTS):
        assert adapter(version).refuse_ask(Ask(kind, {"requestedSchema": {}})) is None


def test_2025_11_25_keeps_elicitation_schemas() -> None:
    ask = Ask(AskKind.ELICIT, {"mode": "form", "message": "pick", "requestedSchema": NEW_SCHEMA})
    message = adapter("2025-11-25").encode_ask(ask, 1)
    assert message is not None
    assert message["params"] == ask.params


def test_2025_11_25_keeps_url_elicitation() -> None:
    ask = Ask(
        AskKind.ELICIT,
        {"mode": "url", "message": "log in", "url": "https://x/a", "elicitationId": "e"},
    )
    message = adapter("2025-11-25").encode_ask(ask, 1)
    assert message is not None
    assert message["params"] == ask.params


@pytest.mark.parametrize("version", VERSIONS[:4])
def test_sampling_and_roots_params_pass_unchanged(version: str) -> None:
    params = {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 5,
        "x-vendor": 1,
    }
    message = adapter(version).encode_ask(Ask(AskKind.SAMPLE, params), 2)
    assert message is not None
    assert message["params"] == params


def test_a_task_result_keeps_its_result_type_for_stateless_clients() -> None:
    from gateway.core import Operation

    adapter = AdapterSet.default().by_version["2026-07-28"]
    call = Call(
        id=3,
        operation=Operation.TOOLS_CALL,
        method="tools/call",
        params={"name": "long"},
        client=ClientContext("2026-07-28"),
    )
    task = {"resultType": "task", "taskId": "t1", "status": "working"}
    message = adapter.encode(call, ServerProfile(), Value(task))
    assert message is not None
    assert message["result"]["resultType"] == "task"
    assert message["result"]["taskId"] == "t1"


# ------------------------------------------------- what the mutation run asked for


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_a_question_the_client_cannot_take_says_which_and_what_is_needed(version: str) -> None:
    error = encode(version, Operation.TOOLS_CALL, NEEDS)["error"]
    assert error["message"] == (
        "The server needs elicitation/create, sampling/createMessage, "
        "which this client cannot provide"
    )
    nothing = encode(version, Operation.PROMPTS_GET, InputRequired(state="s"))["error"]
    assert nothing["message"] == "The server needs input, which this client cannot provide"
    assert nothing["data"] == {"requiredCapabilities": {}}


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
def test_the_tool_result_that_asks_the_model_is_spelled_out(version: str) -> None:
    needs = InputRequired(asks={"q1": ROOTS}, state=None)
    text = encode(version, Operation.TOOLS_CALL, needs)["result"]["content"][0]["text"]
    assert text == "\n".join(
        [
            "This tool needs more input before it can finish.",
            "- `q1` (roots/list): roots/list",
            f"Call the tool again with the same arguments plus `{ANSWERS_ARGUMENT}` "
            '(an object mapping each key above to {"action": "accept", "content": {...}} '
            f'or {{"action": "decline"}}) and `{STATE_ARGUMENT}` set to the value below.',
            f"{STATE_ARGUMENT}: ",
        ]
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("headers", "kind", "said"),
    [
        (
            {"accept": "application/json, text/event-stream"},
            FailureKind.UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        ),
        (
            {"content-type": "text/plain", "accept": "*/*"},
            FailureKind.UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        ),
        (
            {"content-type": "application/json", "accept": "application/json"},
            FailureKind.NOT_ACCEPTABLE,
            "Accept must list both application/json and text/event-stream",
        ),
        (
            {"content-type": "application/json"},
            FailureKind.NOT_ACCEPTABLE,
            "Accept must list both application/json and text/event-stream",
        ),
    ],
)
def test_a_post_with_the_wrong_media_types_is_refused_saying_which(
    version: str, headers: dict[str, str], kind: FailureKind, said: str
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    failure = adapter(version).check_http(Preamble(body=body, headers=headers))
    assert failure is not None
    assert failure.kind is kind and failure.message == said
    relaxed = {**headers, "content-type": "Application/JSON; charset=utf-8", "accept": "*/*"}
    stdio_like = Preamble(body=body, headers=relaxed, transport="sse")
    if version != MODERN:
        assert adapter(version).check_http(stdio_like) is None
