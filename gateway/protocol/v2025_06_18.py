"""MCP 2025-06-18: elicitation, structured output, titles, resource links, no batches."""

from __future__ import annotations

from typing import Any, ClassVar

from gateway.core import Answer, Ask, AskKind, Operation
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
    verbatim_operations = frozenset({Operation.TOOLS_CALL, Operation.PROMPTS_GET})
    structured_content = "object"
    version_header = True

    def project_ask_params(self, ask: Ask) -> dict[str, Any]:
        params = dict(ask.params)
        if ask.kind is AskKind.ELICIT and "url" not in self.client_elicitation_modes:
            params.pop("mode", None)
        schema = params.get("requestedSchema")
        if ask.kind is AskKind.ELICIT and self.flat_elicitation and isinstance(schema, dict):
            params["requestedSchema"] = _flat_elicitation_schema(schema)[0]
        return params

    def refuse_ask(self, ask: Ask) -> Answer | None:
        """An elicitation whose required field has no form in this revision (a
        multi-select, say) cannot be put to the client: the server is told why."""
        schema = ask.params.get("requestedSchema")
        if ask.kind is not AskKind.ELICIT or not self.flat_elicitation:
            return None
        if not isinstance(schema, dict):
            return None
        unexpressed = _flat_elicitation_schema(schema)[1]
        if not unexpressed:
            return None
        return Answer(
            error={
                "code": -32602,
                "message": f"the client speaks MCP {self.version}, whose elicitation "
                f"schemas cannot express the required field(s) {', '.join(unexpressed)}",
            }
        )

    client_elicitation_modes: ClassVar[frozenset[str]] = frozenset({"form"})
    # Elicitation schemas as this revision defines them: primitives and plain enums
    # (with `enumNames`) only, no multi-select, defaults on booleans only.
    flat_elicitation: ClassVar[bool] = True


# What each kind of field may say in a 2025-06-18 elicitation schema (its schema.json).
_STRING_KEYS = frozenset({"type", "title", "description", "minLength", "maxLength", "format"})
_NUMBER_KEYS = frozenset({"type", "title", "description", "minimum", "maximum"})
_BOOLEAN_KEYS = frozenset({"type", "title", "description", "default"})
_ENUM_KEYS = frozenset({"type", "title", "description", "enum", "enumNames"})


def _flat_elicitation_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The schema as 2025-06-18 defines it, and the required fields it cannot express
    (optional ones are left out).  Titled enums (`oneOf` of `const`/`title`) become
    `enum` + `enumNames`; keys the revision does not define are dropped."""
    raw = schema.get("properties")
    properties: dict[str, Any] = {}
    required = schema.get("required")
    wanted = set(required) if isinstance(required, list) else set()
    unexpressed = []
    for name, prop in raw.items() if isinstance(raw, dict) else ():
        flat = _flat_field(prop) if isinstance(prop, dict) else None
        if flat is not None:
            properties[name] = flat
        elif name in wanted:
            unexpressed.append(str(name))
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if isinstance(required, list):
        out["required"] = [name for name in required if name in properties]
    return out, unexpressed


def _flat_field(prop: dict[str, Any]) -> dict[str, Any] | None:
    """One field in 2025-06-18 terms, or None when it has no such form."""
    kind = prop.get("type")
    options = prop.get("oneOf")
    if kind == "string" and isinstance(options, list):
        if not options or not all(_titled_option(o) for o in options):
            return None
        # The options' values and titles replace any enum the field also carries.
        titled = {k: v for k, v in prop.items() if k in _ENUM_KEYS}
        values = [o["const"] for o in options]
        return {
            **titled,
            "enum": values,
            "enumNames": [o.get("title", o["const"]) for o in options],
        }
    if kind == "string" and "enum" in prop:
        return {k: v for k, v in prop.items() if k in _ENUM_KEYS}
    keys = {"string": _STRING_KEYS, "number": _NUMBER_KEYS, "integer": _NUMBER_KEYS}
    allowed = _BOOLEAN_KEYS if kind == "boolean" else keys.get(str(kind))
    if allowed is None:
        return None  # multi-select arrays, or anything no revision defines
    return {k: v for k, v in prop.items() if k in allowed}


def _titled_option(option: Any) -> bool:
    return isinstance(option, dict) and isinstance(option.get("const"), str)
