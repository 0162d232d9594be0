"""Projection: what a client of a revision may see, in one place.

Declarations (tools, resources, templates, prompts, implementation info),
capabilities, content blocks and results are projected by field tables: every
field any revision defines is listed here (`KNOWN_*`); a known field passes only
where the revision's own table lists it, an unknown one always passes.  What a
revision cannot carry is downgraded (content) or dropped (fields), never refused.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from gateway.core import (
    AskKind,
    Operation,
    PromptSpec,
    ResourceSpec,
    ResourceTemplateSpec,
    ServerProfile,
    ToolSpec,
)
from gateway.protocol.adapter.base import ANSWERS_ARGUMENT, STATE_ARGUMENT, AdapterBase

# Every field any revision defines, per declaration type.  A field outside
# these sets is unknown and always passes through; a known field passes only
# where the adapter's own table lists it.
KNOWN_TOOL_FIELDS = frozenset(
    {
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
        "icons",
        "execution",
        "_meta",
    }
)
KNOWN_RESOURCE_FIELDS = frozenset(
    {"uri", "name", "title", "description", "mimeType", "size", "annotations", "icons", "_meta"}
)
KNOWN_TEMPLATE_FIELDS = frozenset(
    {"uriTemplate", "name", "title", "description", "mimeType", "annotations", "icons", "_meta"}
)
KNOWN_PROMPT_FIELDS = frozenset({"name", "title", "description", "arguments", "icons", "_meta"})
KNOWN_IMPLEMENTATION_FIELDS = frozenset(
    {"name", "version", "title", "description", "icons", "websiteUrl"}
)
KNOWN_CONTENT_TYPES = frozenset(
    {"text", "image", "audio", "resource", "resource_link", "tool_use", "tool_result"}
)
KNOWN_SERVER_CAPABILITIES = frozenset(
    {
        "experimental",
        "logging",
        "prompts",
        "resources",
        "tools",
        "completions",
        "tasks",
        "extensions",
    }
)
KNOWN_CLIENT_CAPABILITIES = frozenset(
    {"experimental", "roots", "sampling", "elicitation", "tasks", "extensions"}
)
# Result fields that only exist on some revisions.
KNOWN_RESULT_FIELDS = frozenset({"resultType", "ttlMs", "cacheScope", "structuredContent"})
# The fields of a result the pass-through lane hands on as sent, by operation (with
# those of ``result_fields`` the revision has, but its caching hints).
VERBATIM_FIELDS = {
    Operation.TOOLS_CALL: frozenset({"content", "isError", "_meta"}),
    Operation.PROMPTS_GET: frozenset({"description", "messages", "_meta"}),
}


def keep(item: dict[str, Any], known: frozenset[str], allowed: frozenset[str]) -> dict[str, Any]:
    """Drop the known fields this revision cannot express; keep everything else."""
    return {k: v for k, v in item.items() if k not in known or k in allowed}


def _with_reserved_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    schema = dict(schema)
    properties = dict(schema.get("properties") or {})
    properties[ANSWERS_ARGUMENT] = {
        "type": "object",
        "description": "Only when a previous call asked for input: the answers, by key.",
    }
    properties[STATE_ARGUMENT] = {
        "type": "string",
        "description": "Only when a previous call asked for input: the state it returned.",
    }
    schema["properties"] = properties
    return schema


class Projection(AdapterBase):
    """Results, declarations and content as this revision's clients may see them."""

    def project_result_fields(self, result: dict[str, Any]) -> dict[str, Any]:
        return keep(result, KNOWN_RESULT_FIELDS, self.result_fields)

    def project_result(
        self, operation: Operation, result: dict[str, Any], profile: ServerProfile
    ) -> dict[str, Any]:
        """A complete result projected onto this revision, lossless where it can be."""
        out = self.project_result_fields(result)
        if operation is Operation.TOOLS_LIST and isinstance(out.get("tools"), list):
            out["tools"] = self._describe_all(out["tools"], ToolSpec, self.describe_tool, profile)
        elif operation is Operation.RESOURCES_LIST and isinstance(out.get("resources"), list):
            out["resources"] = self._describe_all(
                out["resources"], ResourceSpec, self.describe_resource, profile
            )
        elif operation is Operation.RESOURCES_TEMPLATES_LIST and isinstance(
            out.get("resourceTemplates"), list
        ):
            out["resourceTemplates"] = self._describe_all(
                out["resourceTemplates"], ResourceTemplateSpec, self.describe_template, profile
            )
        elif operation is Operation.PROMPTS_LIST and isinstance(out.get("prompts"), list):
            out["prompts"] = self._describe_all(
                out["prompts"], PromptSpec, self.describe_prompt, profile
            )
        elif operation is Operation.TOOLS_CALL:
            out = self.project_tool_result(result, out)
        elif operation is Operation.PROMPTS_GET and isinstance(out.get("messages"), list):
            out["messages"] = [self.project_message(m) for m in out["messages"]]
        elif operation is Operation.RESOURCES_READ and isinstance(out.get("contents"), list):
            out["contents"] = [self.project_resource_contents(c) for c in out["contents"]]
        elif operation in (Operation.INITIALIZE, Operation.DISCOVER):
            if isinstance(out.get("capabilities"), dict):
                out["capabilities"] = self.capabilities(out["capabilities"])
            if isinstance(out.get("serverInfo"), dict):
                out["serverInfo"] = self.describe_implementation(out["serverInfo"])
        return out

    def _describe_all(
        self, items: list[Any], spec_type: type[Any], describe: Any, profile: ServerProfile
    ) -> list[Any]:
        out = []
        for item in items:
            try:
                spec = spec_type.model_validate(item)
            except ValidationError:
                out.append(item)  # not ours to judge: pass it on as the upstream sent it
                continue
            described = describe(spec, profile)
            if described is not None:
                out.append(described)
        return out

    def describe_tool(
        self, spec: ToolSpec, profile: ServerProfile | None = None
    ) -> dict[str, Any] | None:
        execution = spec.execution if isinstance(spec.execution, dict) else {}
        if (
            execution.get("taskSupport") == "required"
            and "execution" not in self.tool_fields
            and not self.offers_task_tools
        ):
            # Only callable as a task, and this revision has no tasks: hidden, since
            # every call a client of it could make would fail.
            return None
        tool = keep(spec.wire(), KNOWN_TOOL_FIELDS, self.tool_fields)  # a fresh copy
        if profile is not None and self.asks_in_arguments and self._needs_reserved(profile):
            tool["inputSchema"] = _with_reserved_arguments(tool.get("inputSchema") or {})
        if spec.title and "title" not in self.tool_fields and "annotations" in self.tool_fields:
            # No top-level title yet: annotations.title is where such a revision shows one.
            annotations = dict(tool.get("annotations") or {})
            annotations.setdefault("title", spec.title)
            tool["annotations"] = annotations
        output = tool.get("outputSchema")
        if (
            self.structured_content == "object"
            and output is not None
            and not (isinstance(output, dict) and output.get("type") == "object")
        ):
            # Only object-rooted output schemas exist in such a revision; others are
            # dropped, with the matching structuredContent (it falls back to text).
            del tool["outputSchema"]
        return tool

    def _needs_reserved(self, profile: ServerProfile) -> bool:
        """Reserved answer arguments only where the upstream may ask what we cannot push."""
        return any(AskKind(kind) not in self.pushable_asks for kind in profile.ask_kinds)

    def describe_resource(
        self, spec: ResourceSpec, profile: ServerProfile | None = None
    ) -> dict[str, Any] | None:
        resource = keep(spec.wire(), KNOWN_RESOURCE_FIELDS, self.resource_fields)
        return self._project_annotations(resource)

    def describe_template(
        self, spec: ResourceTemplateSpec, profile: ServerProfile | None = None
    ) -> dict[str, Any] | None:
        template = keep(spec.wire(), KNOWN_TEMPLATE_FIELDS, self.template_fields)
        return self._project_annotations(template)

    def describe_prompt(
        self, spec: PromptSpec, profile: ServerProfile | None = None
    ) -> dict[str, Any] | None:
        prompt = keep(spec.wire(), KNOWN_PROMPT_FIELDS, self.prompt_fields)
        if isinstance(prompt.get("arguments"), list) and "title" not in self.prompt_fields:
            # The spec reads each argument as an object.
            prompt["arguments"] = [
                {k: v for k, v in a.items() if k != "title"} for a in prompt["arguments"]
            ]
        return prompt

    def describe_implementation(self, info: dict[str, Any]) -> dict[str, Any]:
        return keep(info, KNOWN_IMPLEMENTATION_FIELDS, self.implementation_fields)

    def capabilities(self, server_capabilities: dict[str, Any]) -> dict[str, Any]:
        """The upstream's capabilities as this revision's clients may see them."""
        return keep(server_capabilities, KNOWN_SERVER_CAPABILITIES, self.server_capabilities)

    def _project_annotations(self, item: dict[str, Any]) -> dict[str, Any]:
        annotations = item.get("annotations")
        if not self.content_meta and isinstance(annotations, dict):
            item["annotations"] = {k: v for k, v in annotations.items() if k != "lastModified"}
        return item

    def project_content(self, block: Any) -> Any:
        """One content block as this revision can carry it (downgraded, never dropped)."""
        if not isinstance(block, dict):
            return block
        kind = block.get("type")
        if isinstance(kind, str) and kind in KNOWN_CONTENT_TYPES and kind not in self.content_types:
            return self.downgrade_content(block)
        block = dict(block)
        if not self.content_meta:
            block.pop("_meta", None)
            self._project_annotations(block)
            resource = block.get("resource")
            if isinstance(resource, dict) and "_meta" in resource:
                block["resource"] = {k: v for k, v in resource.items() if k != "_meta"}
        if kind == "resource_link" and "icons" not in self.resource_fields:
            block.pop("icons", None)
        return block

    def downgrade_content(self, block: dict[str, Any]) -> dict[str, Any]:
        """A text block that says what the client's revision could not show."""
        kind = block.get("type")
        if kind == "resource_link":
            name = block.get("title") or block.get("name") or block.get("uri")
            text = f"Resource link: {block.get('uri')} ({name})"
        else:
            text = f"[{kind} content ({block.get('mimeType', 'unknown type')}) omitted]"
        return {"type": "text", "text": text}

    def project_tool_result(self, original: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
        content = out.get("content")
        if isinstance(content, list):
            out["content"] = [self.project_content(block) for block in content]
        structured = original.get("structuredContent")
        fits = self.structured_content == "any" or (
            self.structured_content == "object" and isinstance(structured, dict)
        )
        # Where it fits, the result's fields (projected already) carry it as it is.
        if "structuredContent" in original and not fits:
            out.pop("structuredContent", None)
            blocks = out.setdefault("content", [])
            if isinstance(blocks, list) and not any(
                isinstance(b, dict) and b.get("type") == "text" for b in blocks
            ):
                blocks.append({"type": "text", "text": orjson.dumps(structured).decode()})
        return out

    def verbatim_result(
        self, operation: Operation, message: dict[str, Any], profile: ServerProfile
    ) -> dict[str, Any] | None:
        """The result of an upstream's response (of this revision) that its client may
        have exactly as sent, since projecting it would change nothing; None: it takes
        the full path (an error, a question, anything the projection reworks).  Only
        revisions whose content blocks pass whole (``content_meta``) have such."""
        result = message.get("result")
        if type(result) is not dict or "error" in message or not self.content_meta:
            return None
        allowed = VERBATIM_FIELDS.get(operation)
        if allowed is None or not result.keys() <= allowed | self.result_fields:
            return None
        meta = result.get("_meta")
        if meta is not None and type(meta) is not dict:
            return None
        if operation is Operation.TOOLS_CALL:
            blocks = result.get("content", ())
            if "structuredContent" in result and not self._fits(result["structuredContent"]):
                return None
        else:
            messages = result.get("messages", ())
            if type(messages) is not list or any(type(m) is not dict for m in messages):
                return None
            blocks = [m.get("content") for m in messages]
        if type(blocks) not in (list, tuple) or not all(map(self._whole, blocks)):
            return None
        return result

    def _fits(self, structured: Any) -> bool:
        """``structuredContent`` this revision carries as it is."""
        kind = self.structured_content
        return kind == "any" or (kind == "object" and isinstance(structured, dict))

    def _whole(self, block: Any) -> bool:
        """A content block ``project_content`` leaves as it is."""
        if type(block) is not dict or block.get("type") not in self.content_types:
            return False
        return not (
            block["type"] == "resource_link"
            and "icons" in block
            and "icons" not in self.resource_fields
        )

    def project_message(self, message: Any) -> Any:
        if isinstance(message, dict) and "content" in message:
            message = dict(message)
            message["content"] = self.project_content(message["content"])
        return message

    def project_resource_contents(self, contents: Any) -> Any:
        if isinstance(contents, dict) and not self.content_meta and "_meta" in contents:
            return {k: v for k, v in contents.items() if k != "_meta"}
        return contents
