"""Projection, per revision: the edges a mutation run asked for (reserved arguments,
unreadable items, schemas without a flat form)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import (
    Ask,
    AskKind,
    Operation,
    ServerProfile,
    Value,
)
from gateway.protocol.adapter import ANSWERS_ARGUMENT, STATE_ARGUMENT
from tests.unit.protocol.adapter.test_projection import (
    AUDIO,
    CAPABILITIES,
    INFO,
    TOOL,
    VERSIONS,
    adapter,
    call,
    encode,
)

# ------------------------------------------------- what the mutation run asked for

RESERVED = {
    ANSWERS_ARGUMENT: {
        "type": "object",
        "description": "Only when a previous call asked for input: the answers, by key.",
    },
    STATE_ARGUMENT: {
        "type": "string",
        "description": "Only when a previous call asked for input: the state it returned.",
    },
}


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
def test_a_listed_tool_offers_the_reserved_arguments_when_the_upstream_may_elicit(
    version: str,
) -> None:
    a = adapter(version)
    call_ = call(version, Operation.TOOLS_LIST)
    result = {"tools": [TOOL]}
    eliciting = ServerProfile(ask_kinds=("elicitation/create",))
    message = a.encode(call_, eliciting, Value(result))
    assert message is not None
    properties = message["result"]["tools"][0]["inputSchema"]["properties"]
    assert properties == {"q": {"type": "string"}, **RESERVED}
    plain = a.encode(call_, ServerProfile(ask_kinds=("roots/list",)), Value(result))
    assert plain is not None
    assert plain["result"]["tools"][0]["inputSchema"]["properties"] == {"q": {"type": "string"}}


@pytest.mark.parametrize("version", VERSIONS)
def test_an_unreadable_item_does_not_cut_the_list_short(version: str) -> None:
    malformed = {"title": "no name"}
    out = encode(version, Operation.TOOLS_LIST, {"tools": [malformed, TOOL, malformed]})
    assert out["tools"][0] == malformed and out["tools"][2] == malformed
    assert out["tools"][1]["name"] == "search"


def test_content_a_revision_cannot_show_is_said_in_text() -> None:
    old = adapter("2024-11-05")
    assert old.project_content(AUDIO) == {
        "type": "text",
        "text": "[audio content (audio/wav) omitted]",
    }
    assert old.project_content({"type": "audio", "data": "x"}) == {
        "type": "text",
        "text": "[audio content (unknown type) omitted]",
    }
    uri = "file:///linked"
    for link, shown in [
        ({"type": "resource_link", "uri": uri, "name": "n", "title": "T"}, "T"),
        ({"type": "resource_link", "uri": uri, "name": "n"}, "n"),
        ({"type": "resource_link", "uri": uri}, uri),
    ]:
        assert old.project_content(link) == {
            "type": "text",
            "text": f"Resource link: {uri} ({shown})",
        }


def test_a_resource_link_without_icons_passes_where_icons_do_not_exist() -> None:
    link = {"type": "resource_link", "uri": "file:///a", "name": "a"}
    assert adapter("2025-06-18").project_content(link) == link


@pytest.mark.parametrize("version", VERSIONS[:4])
def test_an_initialize_results_server_info_is_projected(version: str) -> None:
    result = {"protocolVersion": version, "capabilities": CAPABILITIES, "serverInfo": INFO}
    out = encode(version, Operation.INITIALIZE, result)
    assert out["serverInfo"] == adapter(version).describe_implementation(INFO)
    assert out["capabilities"] == adapter(version).capabilities(CAPABILITIES)


V0618 = "2025-06-18"


def flattened(schema: dict[str, Any]) -> dict[str, Any]:
    ask = Ask(AskKind.ELICIT, {"message": "m", "requestedSchema": schema})
    message = adapter(V0618).encode_ask(ask, 1)
    assert message is not None
    result: dict[str, Any] = message["params"]["requestedSchema"]
    return result


def test_a_malformed_elicitation_schema_flattens_to_what_it_can_say() -> None:
    assert flattened({"type": "object"}) == {"type": "object", "properties": {}}
    assert flattened({"properties": {"a": {"type": "string"}}, "required": "a"}) == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
    }
    assert flattened({"properties": {"a": "junk", "b": {"type": "boolean"}}}) == {
        "type": "object",
        "properties": {"b": {"type": "boolean"}},
    }
    # A titled enum with an option that is not {const, title} has no flat form.
    odd = {"type": "string", "oneOf": ["r", {"const": "g"}]}
    untitled = {"type": "string", "oneOf": [{"title": "no const"}]}
    empty = {"type": "string", "oneOf": []}
    assert flattened({"properties": {"a": odd, "b": untitled, "c": empty}})["properties"] == {}


def test_a_titled_enum_keeps_its_own_values_over_a_stray_enum() -> None:
    field = {
        "type": "string",
        "title": "Colour",
        "enum": ["stale"],
        "enumNames": ["Stale"],
        "oneOf": [{"const": "r", "title": "Red"}, {"const": "g"}],
    }
    assert flattened({"properties": {"c": field}})["properties"]["c"] == {
        "type": "string",
        "title": "Colour",
        "enum": ["r", "g"],
        "enumNames": ["Red", "g"],
    }


def test_required_fields_without_a_flat_form_refuse_the_question_naming_them() -> None:
    schema = {
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "mood": {"type": "string", "oneOf": [1]},
            "name": {"type": "string"},
        },
        "required": ["tags", "mood", "name"],
    }
    refused = adapter(V0618).refuse_ask(Ask(AskKind.ELICIT, {"requestedSchema": schema}))
    assert refused is not None and refused.error is not None
    assert refused.error["code"] == -32602
    assert refused.error["message"] == (
        "the client speaks MCP 2025-06-18, whose elicitation schemas cannot express "
        "the required field(s) tags, mood"
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_a_prompt_message_that_is_no_object_is_passed_on_as_sent(version: str) -> None:
    out = encode(version, Operation.PROMPTS_GET, {"messages": ["no content", {"role": "user"}]})
    assert out["messages"] == ["no content", {"role": "user"}]
