"""MCP 2025-06-18: elicitation, structured output, titles, resource links, no batches."""

from __future__ import annotations

from typing import Any, ClassVar

from gateway.core import Ask, AskKind, ServerProfile, ToolSpec
from gateway.protocol.v2025_03_26 import Adapter2025_03_26


class Adapter2025_06_18(Adapter2025_03_26):
    version = "2025-06-18"

    asks_in_arguments = False
    allows_batch = False

    ask_kinds = Adapter2025_03_26.ask_kinds | {AskKind.ELICIT}
    pushable_asks = Adapter2025_03_26.pushable_asks | {AskKind.ELICIT}
    tool_fields = Adapter2025_03_26.tool_fields | {"title", "outputSchema", "_meta"}
    resource_fields = Adapter2025_03_26.resource_fields | {"title", "_meta"}
    template_fields = Adapter2025_03_26.template_fields | {"title", "_meta"}
    prompt_fields = Adapter2025_03_26.prompt_fields | {"title", "_meta"}
    implementation_fields = Adapter2025_03_26.implementation_fields | {"title"}
    content_types = Adapter2025_03_26.content_types | {"resource_link"}
    client_capabilities = Adapter2025_03_26.client_capabilities | {"elicitation"}
    result_fields = frozenset({"structuredContent"})
    content_meta = True
    structured_content = "object"
    version_header = True

    def describe_tool(
        self, spec: ToolSpec, profile: ServerProfile | None = None
    ) -> dict[str, Any] | None:
        tool = super().describe_tool(spec, profile)
        output = tool.get("outputSchema") if tool is not None else None
        object_rooted = isinstance(output, dict) and output.get("type") == "object"
        # Only object-rooted output schemas exist here; others are dropped, with
        # the matching structuredContent (which falls back to a text block).
        drop = self.structured_content == "object" and output is not None and not object_rooted
        if tool is not None and drop:
            del tool["outputSchema"]
        return tool

    def project_ask_params(self, ask: Ask) -> dict[str, Any]:
        params = dict(ask.params)
        if ask.kind is AskKind.ELICIT and "url" not in self.client_elicitation_modes:
            params.pop("mode", None)
            schema = params.get("requestedSchema")
            if isinstance(schema, dict):
                params["requestedSchema"] = _flat_elicitation_schema(schema)
        return params

    client_elicitation_modes: ClassVar[frozenset[str]] = frozenset({"form"})


def _flat_elicitation_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Newer enum forms as `enum` + `enumNames`; non-boolean defaults dropped."""
    properties = {}
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict):
            properties[name] = prop
            continue
        prop = dict(prop)
        options = prop.pop("oneOf", None)
        if isinstance(options, list) and all(isinstance(o, dict) for o in options):
            prop["type"] = "string"
            prop["enum"] = [o.get("const") for o in options]
            prop["enumNames"] = [o.get("title", o.get("const")) for o in options]
        if prop.get("type") != "boolean":
            prop.pop("default", None)
        properties[name] = prop
    return {**schema, "properties": properties}
