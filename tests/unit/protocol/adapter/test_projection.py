"""Projections: the newest declarations and results, as every revision may carry them."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gateway.core import (
    Call,
    ClientContext,
    Operation,
    PromptSpec,
    ResourceSpec,
    ResourceTemplateSpec,
    ServerProfile,
    ToolSpec,
    Value,
)
from gateway.protocol.adapter import ANSWERS_ARGUMENT, STATE_ARGUMENT, Adapter
from gateway.protocol.selection import AdapterSet

SET = AdapterSet.default()
VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
MODERN = "2026-07-28"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
ICONS = [{"src": "https://example.com/i.png", "mimeType": "image/png", "sizes": ["48x48"]}]
VENDOR = {"x-vendor": {"kept": True}, "com.acme/extra": [1, 2]}


def adapter(version: str) -> Adapter:
    return SET.by_version[version]


def at_least(version: str, since: str) -> bool:
    return version >= since


def without(item: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in keys}


# --------------------------------------------------------------------- tools

TOOL: dict[str, Any] = {
    "name": "search",
    "title": "Search",
    "description": "Search the index",
    "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
    "outputSchema": {"type": "object", "properties": {"hits": {"type": "array"}}},
    "annotations": {"readOnlyHint": True, "openWorldHint": False, "x-hint": 1},
    "icons": ICONS,
    "execution": {"taskSupport": "optional"},
    "_meta": {"com.acme/k": 1},
    **VENDOR,
}
TOOL_FIELDS: dict[str, set[str]] = {
    "2024-11-05": {"name", "description", "inputSchema"},
    "2025-03-26": {"name", "description", "inputSchema", "annotations"},
    "2025-06-18": {
        "name",
        "description",
        "inputSchema",
        "annotations",
        "title",
        "outputSchema",
        "_meta",
    },
    "2025-11-25": {
        "name",
        "description",
        "inputSchema",
        "annotations",
        "title",
        "outputSchema",
        "_meta",
        "icons",
        "execution",
    },
    MODERN: {
        "name",
        "description",
        "inputSchema",
        "annotations",
        "title",
        "outputSchema",
        "_meta",
        "icons",
    },
}


@pytest.mark.parametrize("version", VERSIONS)
def test_tool_projection(version: str) -> None:
    before = copy.deepcopy(TOOL)
    tool = adapter(version).describe_tool(ToolSpec.model_validate(TOOL))
    assert tool is not None
    assert set(tool) == TOOL_FIELDS[version] | set(VENDOR)
    for key in TOOL_FIELDS[version] | set(VENDOR):
        if key != "annotations":
            assert tool[key] == TOOL[key], key
    if version == "2025-03-26":
        # No top-level title yet: it is shown as annotations.title.
        assert tool["annotations"] == {**TOOL["annotations"], "title": "Search"}
    elif "annotations" in tool:
        assert tool["annotations"] == TOOL["annotations"]
    assert before == TOOL


def test_2025_03_26_keeps_an_existing_annotations_title() -> None:
    spec = ToolSpec.model_validate({**TOOL, "annotations": {"title": "Mine"}})
    tool = adapter("2025-03-26").describe_tool(spec)
    assert tool is not None
    assert tool["annotations"] == {"title": "Mine"}


def test_2025_03_26_title_without_annotations() -> None:
    spec = ToolSpec.model_validate({"name": "t", "title": "T", "inputSchema": {"type": "object"}})
    tool = adapter("2025-03-26").describe_tool(spec)
    assert tool == {"name": "t", "inputSchema": {"type": "object"}, "annotations": {"title": "T"}}


@pytest.mark.parametrize("version", VERSIONS)
def test_tool_without_title_gets_no_annotations(version: str) -> None:
    spec = ToolSpec.model_validate({"name": "t", "inputSchema": {"type": "object"}})
    assert adapter(version).describe_tool(spec) == {"name": "t", "inputSchema": {"type": "object"}}


@pytest.mark.parametrize("version", VERSIONS)
def test_non_object_output_schema(version: str) -> None:
    spec = ToolSpec.model_validate({**TOOL, "outputSchema": {"type": "array", "items": {}}})
    tool = adapter(version).describe_tool(spec)
    assert tool is not None
    # Only 2026 allows output schemas that are not object-rooted.
    assert ("outputSchema" in tool) == (version == MODERN)


@pytest.mark.parametrize("version", VERSIONS)
def test_tool_without_input_schema_gets_the_default(version: str) -> None:
    tool = adapter(version).describe_tool(ToolSpec.model_validate({"name": "bare"}))
    assert tool == {"name": "bare"} or tool == {"name": "bare", "inputSchema": {"type": "object"}}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("ask_kinds", "needs"),
    [
        (("elicitation/create",), True),
        (("sampling/createMessage", "roots/list"), False),
        ((), False),
    ],
)
def test_reserved_arguments(version: str, ask_kinds: tuple[str, ...], needs: bool) -> None:
    profile = ServerProfile(ask_kinds=ask_kinds)
    tool = adapter(version).describe_tool(ToolSpec.model_validate(TOOL), profile)
    assert tool is not None
    properties = tool["inputSchema"]["properties"]
    reserved = {ANSWERS_ARGUMENT, STATE_ARGUMENT} <= set(properties)
    assert reserved == (needs and adapter(version).asks_in_arguments)
    assert properties["q"] == {"type": "string"}
    assert (
        "required" not in tool["inputSchema"]
        or ANSWERS_ARGUMENT not in tool["inputSchema"]["required"]
    )
    assert set(TOOL["inputSchema"]["properties"]) == {"q"}  # not mutated


# ------------------------------------------------- resources and templates

ANNOTATIONS = {"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-12T15:00:58Z"}
RESOURCE: dict[str, Any] = {
    "uri": "file:///a.txt",
    "name": "a",
    "title": "A file",
    "description": "d",
    "mimeType": "text/plain",
    "size": 12,
    "annotations": ANNOTATIONS,
    "icons": ICONS,
    "_meta": {"k": 1},
    **VENDOR,
}
TEMPLATE: dict[str, Any] = {
    "uriTemplate": "file:///{path}",
    "name": "files",
    "title": "Files",
    "description": "d",
    "mimeType": "text/plain",
    "annotations": ANNOTATIONS,
    "icons": ICONS,
    "_meta": {"k": 1},
    **VENDOR,
}


def resource_fields(version: str, base: set[str]) -> set[str]:
    fields = set(base)
    if at_least(version, "2025-06-18"):
        fields |= {"title", "_meta"}
    if at_least(version, "2025-11-25"):
        fields |= {"icons"}
    return fields


@pytest.mark.parametrize("version", VERSIONS)
def test_resource_projection(version: str) -> None:
    resource = adapter(version).describe_resource(ResourceSpec.model_validate(RESOURCE))
    assert resource is not None
    base = {"uri", "name", "description", "mimeType", "size", "annotations"}
    assert set(resource) == resource_fields(version, base) | set(VENDOR)
    if at_least(version, "2025-06-18"):
        assert resource["annotations"] == ANNOTATIONS
    else:
        assert resource["annotations"] == without(ANNOTATIONS, "lastModified")
    assert RESOURCE["annotations"] == ANNOTATIONS


@pytest.mark.parametrize("version", VERSIONS)
def test_template_projection(version: str) -> None:
    template = adapter(version).describe_template(ResourceTemplateSpec.model_validate(TEMPLATE))
    assert template is not None
    base = {"uriTemplate", "name", "description", "mimeType", "annotations"}
    assert set(template) == resource_fields(version, base) | set(VENDOR)
    assert ("lastModified" in template["annotations"]) == at_least(version, "2025-06-18")
    for key in set(template) - {"annotations"}:
        assert template[key] == TEMPLATE[key]


# ------------------------------------------------------------------ prompts

PROMPT: dict[str, Any] = {
    "name": "greet",
    "title": "Greeting",
    "description": "d",
    "arguments": [
        {"name": "who", "title": "Who", "description": "w", "required": True, "x-arg": 1}
    ],
    "icons": ICONS,
    "_meta": {"k": 1},
    **VENDOR,
}


@pytest.mark.parametrize("version", VERSIONS)
def test_prompt_projection(version: str) -> None:
    prompt = adapter(version).describe_prompt(PromptSpec.model_validate(PROMPT))
    assert prompt is not None
    fields = {"name", "description", "arguments"}
    if at_least(version, "2025-06-18"):
        fields |= {"title", "_meta"}
    if at_least(version, "2025-11-25"):
        fields |= {"icons"}
    assert set(prompt) == fields | set(VENDOR)
    argument = prompt["arguments"][0]
    if at_least(version, "2025-06-18"):
        assert argument == PROMPT["arguments"][0]
    else:
        assert argument == without(PROMPT["arguments"][0], "title")
    assert "title" in PROMPT["arguments"][0]


# -------------------------------------------------------------- serverInfo

INFO = {
    "name": "srv",
    "version": "1.2",
    "title": "Server",
    "description": "desc",
    "icons": ICONS,
    "websiteUrl": "https://example.com",
    **VENDOR,
}


@pytest.mark.parametrize("version", VERSIONS)
def test_implementation_projection(version: str) -> None:
    info = adapter(version).describe_implementation(INFO)
    fields = {"name", "version"}
    if at_least(version, "2025-06-18"):
        fields |= {"title"}
    if at_least(version, "2025-11-25"):
        fields |= {"description", "icons", "websiteUrl"}
    assert info == {k: INFO[k] for k in fields | set(VENDOR)}


# ------------------------------------------------------------- capabilities

CAPABILITIES = {
    "experimental": {"x": {}},
    "logging": {},
    "prompts": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "tools": {"listChanged": True},
    "completions": {},
    "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
    "extensions": {"io.modelcontextprotocol/tasks": {}},
    "com.acme/capability": {"a": 1},
}


@pytest.mark.parametrize("version", VERSIONS)
def test_capabilities_projection(version: str) -> None:
    caps = adapter(version).capabilities(CAPABILITIES)
    fields = {"experimental", "logging", "prompts", "resources", "tools", "com.acme/capability"}
    if version != "2024-11-05":
        fields.add("completions")
    if version == "2025-11-25":
        fields.add("tasks")
    if version == MODERN:
        fields.add("extensions")
    assert caps == {k: CAPABILITIES[k] for k in fields}


# ------------------------------------------------------------ content blocks

TEXT = {
    "type": "text",
    "text": "hello",
    "annotations": {"audience": ["user"], "lastModified": "2025-01-01T00:00:00Z"},
    "_meta": {"k": 1},
}
IMAGE = {"type": "image", "data": "iVBO", "mimeType": "image/png", "_meta": {"k": 2}}
AUDIO = {"type": "audio", "data": "UklG", "mimeType": "audio/wav"}
EMBEDDED = {
    "type": "resource",
    "resource": {"uri": "file:///e", "mimeType": "text/plain", "text": "e", "_meta": {"k": 3}},
}
LINK = {
    "type": "resource_link",
    "uri": "file:///linked",
    "name": "linked",
    "title": "Linked file",
    "mimeType": "text/plain",
    "icons": ICONS,
}
UNKNOWN_BLOCK = {"type": "com.acme/hologram", "data": 1}


def call(version: str, operation: Operation) -> Call:
    return Call(
        id=1,
        operation=operation,
        method=operation.value,
        params={},
        client=ClientContext(version),
    )


def encode(version: str, operation: Operation, result: dict[str, Any]) -> dict[str, Any]:
    message = adapter(version).encode(call(version, operation), ServerProfile(), Value(result))
    assert message is not None
    out: dict[str, Any] = message["result"]
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_tool_result_content_blocks(version: str) -> None:
    original = {
        "content": [TEXT, IMAGE, AUDIO, EMBEDDED, LINK, UNKNOWN_BLOCK],
        "isError": False,
    }
    before = copy.deepcopy(original)
    content = encode(version, Operation.TOOLS_CALL, original)["content"]
    assert len(content) == 6
    text, image, audio, embedded, link, unknown = content
    assert unknown == UNKNOWN_BLOCK
    if at_least(version, "2025-06-18"):
        assert text == TEXT
        assert image == IMAGE
        assert embedded == EMBEDDED
    else:
        assert text == {"type": "text", "text": "hello", "annotations": {"audience": ["user"]}}
        assert image == without(IMAGE, "_meta")
        assert embedded == {"type": "resource", "resource": without(EMBEDDED["resource"], "_meta")}
    if version == "2024-11-05":
        assert audio["type"] == "text"
        assert "audio" in audio["text"]
        assert "audio/wav" in audio["text"]
    else:
        assert audio == AUDIO
    if at_least(version, "2025-11-25"):
        assert link == LINK
    elif version == "2025-06-18":
        assert link == without(LINK, "icons")
    else:
        assert link["type"] == "text"
        assert "file:///linked" in link["text"]
        assert "Linked file" in link["text"]
    assert original == before


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("structured", "blocks"),
    [
        ({"hits": [1, 2]}, [{"type": "text", "text": "two hits"}]),
        ({"hits": [1, 2]}, []),
        ({"hits": [1, 2]}, [{"type": "image", "data": "x", "mimeType": "image/png"}]),
        ([1, 2, 3], []),
        ([1, 2, 3], [{"type": "text", "text": "three"}]),
        ("just a string", []),
        (7, []),
    ],
    ids=lambda x: json.dumps(x)[:20],
)
def test_structured_content(version: str, structured: Any, blocks: list[Any]) -> None:
    result = encode(
        version,
        Operation.TOOLS_CALL,
        {"content": list(blocks), "structuredContent": structured},
    )
    fits = version == MODERN or (at_least(version, "2025-06-18") and isinstance(structured, dict))
    if fits:
        assert result["structuredContent"] == structured
        assert result["content"] == blocks
        return
    assert "structuredContent" not in result
    has_text = any(b["type"] == "text" for b in blocks)
    if has_text:
        assert result["content"] == blocks
    else:
        assert result["content"][: len(blocks)] == blocks
        assert len(result["content"]) == len(blocks) + 1
        added = result["content"][-1]
        assert added["type"] == "text"
        assert json.loads(added["text"]) == structured


@pytest.mark.parametrize("version", VERSIONS)
def test_structured_content_without_content_list(version: str) -> None:
    result = encode(version, Operation.TOOLS_CALL, {"structuredContent": [1]})
    if version == MODERN:
        assert result["structuredContent"] == [1]
    else:
        assert "structuredContent" not in result
        assert result["content"] == [{"type": "text", "text": "[1]"}]


@pytest.mark.parametrize("version", VERSIONS)
def test_prompt_messages_are_projected(version: str) -> None:
    messages = [
        {"role": "user", "content": TEXT},
        {"role": "assistant", "content": AUDIO},
        {"role": "user", "content": LINK},
    ]
    out = encode(version, Operation.PROMPTS_GET, {"description": "d", "messages": messages})
    assert out["description"] == "d"
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]
    assert out["messages"][1]["content"]["type"] == ("text" if version == "2024-11-05" else "audio")
    assert out["messages"][2]["content"]["type"] == (
        "resource_link" if at_least(version, "2025-06-18") else "text"
    )
    assert ("_meta" in out["messages"][0]["content"]) == at_least(version, "2025-06-18")


@pytest.mark.parametrize("version", VERSIONS)
def test_resource_contents_are_projected(version: str) -> None:
    contents = [
        {"uri": "file:///a", "text": "a", "_meta": {"k": 1}, "x-vendor": 1},
        {"uri": "file:///b", "blob": "Yg==", "mimeType": "application/octet-stream"},
    ]
    out = encode(version, Operation.RESOURCES_READ, {"contents": contents})
    if at_least(version, "2025-06-18"):
        assert out["contents"] == contents
    else:
        assert out["contents"] == [without(contents[0], "_meta"), contents[1]]


# ------------------------------------------------------------ list results


@pytest.mark.parametrize("version", VERSIONS)
def test_list_results_project_each_item(version: str) -> None:
    malformed = {"title": "no name", "x": 1}  # not ours to judge: passed on as sent
    out = encode(version, Operation.TOOLS_LIST, {"tools": [TOOL, malformed], "nextCursor": "next"})
    assert out["nextCursor"] == "next"
    assert out["tools"][0] == adapter(version).describe_tool(ToolSpec.model_validate(TOOL))
    assert out["tools"][1] == malformed
    out = encode(version, Operation.RESOURCES_LIST, {"resources": [RESOURCE]})
    assert out["resources"] == [
        adapter(version).describe_resource(ResourceSpec.model_validate(RESOURCE))
    ]
    out = encode(version, Operation.RESOURCES_TEMPLATES_LIST, {"resourceTemplates": [TEMPLATE]})
    assert out["resourceTemplates"] == [
        adapter(version).describe_template(ResourceTemplateSpec.model_validate(TEMPLATE))
    ]
    out = encode(version, Operation.PROMPTS_LIST, {"prompts": [PROMPT]})
    assert out["prompts"] == [adapter(version).describe_prompt(PromptSpec.model_validate(PROMPT))]


# ------------------------------------------------- initialize and discover


@pytest.mark.parametrize("version", VERSIONS[:4])
def test_initialize_result(version: str) -> None:
    profile = ServerProfile(info=INFO, capabilities=CAPABILITIES, instructions="Be nice.")
    result = adapter(version).initialize_result(profile, version)
    assert set(result) == {"protocolVersion", "capabilities", "serverInfo", "instructions"}
    assert result["protocolVersion"] == version
    assert result["capabilities"] == adapter(version).capabilities(CAPABILITIES)
    assert result["serverInfo"] == adapter(version).describe_implementation(INFO)
    assert result["instructions"] == "Be nice."
    bare = adapter(version).initialize_result(ServerProfile(), version)
    assert "instructions" not in bare


def test_discover_result() -> None:
    profile = ServerProfile(
        info=INFO,
        capabilities=CAPABILITIES,
        instructions="Be nice.",
        cache_ttl_ms=60000,
        cache_scope="public",
    )
    result = adapter(MODERN).discover_result(profile, [MODERN, "2025-11-25"])  # type: ignore[attr-defined]
    assert result["supportedVersions"] == [MODERN, "2025-11-25"]
    assert result["capabilities"] == adapter(MODERN).capabilities(CAPABILITIES)
    assert "tasks" not in result["capabilities"]
    assert result["instructions"] == "Be nice."
    assert result["resultType"] == "complete"
    assert result["ttlMs"] == 60000
    assert result["cacheScope"] == "public"
    assert result["_meta"][SERVER_INFO] == INFO
    assert "serverInfo" not in result


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2026-07-28"])
def test_a_task_only_tool_is_hidden_where_tasks_do_not_exist(version: str) -> None:
    from gateway.core import ToolSpec
    from gateway.protocol.selection import AdapterSet

    adapter = AdapterSet.default().by_version[version]
    required = ToolSpec(name="long", execution={"taskSupport": "required"})
    optional = ToolSpec(name="maybe", execution={"taskSupport": "optional"})
    assert adapter.describe_tool(required) is None
    described = adapter.describe_tool(optional)
    assert described is not None and "execution" not in described


def test_a_task_only_tool_stays_where_tasks_exist() -> None:
    from gateway.core import ToolSpec
    from gateway.protocol.selection import AdapterSet

    adapter = AdapterSet.default().by_version["2025-11-25"]
    described = adapter.describe_tool(ToolSpec(name="long", execution={"taskSupport": "required"}))
    assert described is not None and described["execution"] == {"taskSupport": "required"}
