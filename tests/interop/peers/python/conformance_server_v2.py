"""The official conformance suite's fixtures on the Python `mcp` SDK 2.x (2026-07-28), for
tests/conformance/run.py: the tools, resources and prompts its server scenarios call
(`test_simple_text`, `test://static-text`, `test_simple_prompt`, ...), after the suite's
own example server (examples/servers/typescript/everything-server.ts).

    python conformance_server_v2.py --transport streamable-http --port N [--host 127.0.0.1]

The input-required tools build their `InputRequiredResult` by hand (as the suite's
example does) because the scenarios name the keys of `inputRequests`; `requestState`
is signed with a per-process secret, so a tampered state is refused.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import logging
import secrets
import sys
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer, Resolve, Sample
from mcp.server.mcpserver.utilities.types import Audio, Image
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolResult,
    Completion,
    CreateMessageResult,
    EmbeddedResource,
    ImageContent,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
    TextResourceContents,
)
from pydantic import Field

IMAGE = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJ"
    "RU5ErkJggg=="
)
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
SECRET = secrets.token_bytes(16)
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

mcp = MCPServer("conformance-fixtures-v2", log_level="WARNING")


def _text(text: str) -> TextContent:
    return TextContent(type="text", text=text)


def _done(text: str) -> CallToolResult:
    return CallToolResult(content=[_text(text)])


@mcp.tool(description="Simple text")
def test_simple_text() -> str:
    return "This is a simple text response for testing."


@mcp.tool(description="Image content")
def test_image_content() -> Image:
    return Image(data=base64.b64decode(IMAGE), format="png")


@mcp.tool(description="Audio content")
def test_audio_content() -> Audio:
    return Audio(data=base64.b64decode(AUDIO), format="wav")


def _embedded(uri: str, mime: str, text: str) -> EmbeddedResource:
    return EmbeddedResource(
        type="resource", resource=TextResourceContents(uri=uri, mime_type=mime, text=text)
    )


@mcp.tool(description="Embedded resource")
def test_embedded_resource() -> CallToolResult:
    res = _embedded(
        "test://embedded-resource", "text/plain", "This is an embedded resource content."
    )
    return CallToolResult(content=[res])


@mcp.tool(description="Mixed content")
def test_multiple_content_types() -> CallToolResult:
    data = json.dumps({"test": "data", "value": 123})
    return CallToolResult(
        content=[
            _text("Multiple content types test:"),
            ImageContent(type="image", data=IMAGE, mime_type="image/png"),
            _embedded("test://mixed-content-resource", "application/json", data),
        ]
    )


@mcp.tool(description="Always an error")
def test_error_handling() -> str:
    raise RuntimeError("This tool intentionally returns an error for testing")


@mcp.tool(description="Logs while it runs")
async def test_tool_with_logging(ctx: Context) -> str:
    for line in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(line)
    return "Tool with logging executed successfully"


@mcp.tool(description="Reports progress")
async def test_tool_with_progress(ctx: Context) -> str:
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
    return "progress done"


# --- input required (SEP-2322): hand-built rounds with the keys the scenarios name ---


def _elicit(message: str, field: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


def _sample(text: str) -> dict[str, Any]:
    message = {"role": "user", "content": {"type": "text", "text": text}}
    return {"method": "sampling/createMessage", "params": {"messages": [message], "maxTokens": 100}}


ROOTS = {"method": "roots/list", "params": {}}


def _sign(payload: dict[str, Any]) -> str:
    data = json.dumps(payload, sort_keys=True)
    mac = hmac.new(SECRET, data.encode(), hashlib.sha256).hexdigest()
    return json.dumps({"data": data, "hmac": mac})


def _verify(raw: str | None) -> dict[str, Any] | None:
    try:
        outer = json.loads(raw or "")
        mac = hmac.new(SECRET, outer["data"].encode(), hashlib.sha256).hexdigest()
        if hmac.compare_digest(mac, outer["hmac"]):
            return dict(json.loads(outer["data"]))
    except (ValueError, KeyError, TypeError):
        pass
    return None


def _ask(requests: dict[str, Any], state: dict[str, Any] | None = None) -> InputRequiredResult:
    return InputRequiredResult.model_validate(
        {
            "resultType": "input_required",
            "inputRequests": requests,
            **({"requestState": _sign(state)} if state is not None else {}),
        }
    )


def _answers(ctx: Context) -> dict[str, Any]:
    return {k: v for k, v in (ctx.input_responses or {}).items()}


@mcp.tool(description="Asks a name (elicitation)")
def test_input_required_result_elicitation(ctx: Context) -> CallToolResult | InputRequiredResult:
    if "user_name" not in _answers(ctx):
        return _ask({"user_name": _elicit("What is your name?", "name")})
    return _done(f"Hello, {json.dumps(_answers(ctx)['user_name'], default=str)}")


@mcp.tool(description="Asks a sample")
def test_input_required_result_sampling(ctx: Context) -> CallToolResult | InputRequiredResult:
    if "capital_question" not in _answers(ctx):
        return _ask({"capital_question": _sample("What is the capital of France?")})
    return _done(f"sampled: {json.dumps(_answers(ctx)['capital_question'], default=str)}")


@mcp.tool(description="Asks the roots")
def test_input_required_result_list_roots(ctx: Context) -> CallToolResult | InputRequiredResult:
    if "client_roots" not in _answers(ctx):
        return _ask({"client_roots": ROOTS})
    return _done(f"roots: {json.dumps(_answers(ctx)['client_roots'], default=str)}")


@mcp.tool(description="Asks a confirmation, with requestState")
def test_input_required_result_request_state(
    ctx: Context,
) -> CallToolResult | InputRequiredResult:
    state = _verify(ctx.request_state)
    if "confirm" not in _answers(ctx) or state is None or state.get("step") != "confirm":
        confirm = _elicit("Please confirm", "ok")
        confirm["params"]["requestedSchema"]["properties"] = {"ok": {"type": "boolean"}}
        confirm["params"]["requestedSchema"]["required"] = ["ok"]
        return _ask({"confirm": confirm}, {"step": "confirm"})
    return _done("state-ok: confirmed")


@mcp.tool(description="Asks three things at once")
def test_input_required_result_multiple_inputs(
    ctx: Context,
) -> CallToolResult | InputRequiredResult:
    keys = {"user_name", "greeting", "client_roots"}
    if not keys <= set(_answers(ctx)) or _verify(ctx.request_state) is None:
        return _ask(
            {
                "user_name": _elicit("What is your name?", "name"),
                "greeting": _sample("Say hello"),
                "client_roots": ROOTS,
            },
            {"step": "multiple"},
        )
    return _done("all inputs received")


@mcp.tool(description="Asks over two rounds")
def test_input_required_result_multi_round(ctx: Context) -> CallToolResult | InputRequiredResult:
    state = _verify(ctx.request_state) or {}
    answers = _answers(ctx)
    if state.get("round") == 2 and "color" in answers:
        return _done(f"multi-round complete: {state.get('name')}")
    if state.get("round") == 1 and "name" in answers:
        name = json.dumps(answers["name"], default=str)
        return _ask({"color": _elicit("Favourite colour?", "color")}, {"round": 2, "name": name})
    return _ask({"name": _elicit("What is your name?", "name")}, {"round": 1})


@mcp.tool(description="Asks one thing, with signed requestState")
def test_input_required_result_tampered_state(
    ctx: Context,
) -> CallToolResult | InputRequiredResult:
    if ctx.request_state is None:
        return _ask({"user_name": _elicit("What is your name?", "name")}, {"step": "tamper"})
    if _verify(ctx.request_state) is None:
        raise MCPError(-32602, "requestState failed its integrity check")
    return _done("state-ok")


@mcp.tool(description="Asks only what the client declared")
def test_input_required_result_capabilities(
    ctx: Context,
) -> CallToolResult | InputRequiredResult:
    caps = ctx.client_capabilities
    asks: dict[str, Any] = {}
    if caps is not None and caps.sampling is not None:
        asks["capital_question"] = _sample("What is the capital of France?")
    if caps is not None and caps.elicitation is not None:
        asks["user_name"] = _elicit("What is your name?", "name")
    if asks and not set(asks) <= set(_answers(ctx)):
        return _ask(asks)
    return _done(f"answered: {sorted(_answers(ctx))}")


def _missing_capability_sample() -> Sample:
    message = SamplingMessage(role="user", content=_text("Say hi"))
    return Sample([message], max_tokens=10)


@mcp.tool(description="The suite's diagnostic tool: asks sampling (SEP-2575)")
def test_missing_capability(
    sampled: Annotated[CreateMessageResult, Resolve(_missing_capability_sample)],
) -> str:
    return "sampled"


@mcp.prompt(description="Asks a context first (SEP-2322)")
def test_input_required_result_prompt(ctx: Context) -> str | InputRequiredResult:
    if "user_context" not in _answers(ctx):
        return _ask({"user_context": _elicit("What context should the prompt use?", "context")})
    return f"Prompt with context: {json.dumps(_answers(ctx)['user_context'], default=str)}"


@mcp.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Completion:
    return Completion(values=[], total=0, has_more=False)


# --- the handshake-era asking tools, as 2026-07-28 rounds (a 2025-11-25 client reaches
# them through the gateway, which asks it mid-call) ---

DEFAULTS_FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}
_TITLED = [
    {"const": f"value{i}", "title": t} for i, t in ((1, "First"), (2, "Second"), (3, "Third"))
]
ENUMS_FORM = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": _TITLED},
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"anyOf": _TITLED}},
    },
    "required": [],
}


def _form(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema},
    }


def _asked(
    ctx: Context, key: str, request: dict[str, Any], prefix: str
) -> CallToolResult | InputRequiredResult:
    if key not in _answers(ctx):
        return _ask({key: request})
    return _done(f"{prefix}: {json.dumps(_answers(ctx)[key], default=str)}")


@mcp.tool(description="Asks sampling")
def test_sampling(prompt: str, ctx: Context) -> CallToolResult | InputRequiredResult:
    return _asked(ctx, "sample", _sample(prompt), "LLM response")


@mcp.tool(description="Asks the user")
def test_elicitation(message: str, ctx: Context) -> CallToolResult | InputRequiredResult:
    return _asked(ctx, "answer", _elicit(message, "response"), "User response")


@mcp.tool(description="Elicits with defaults (SEP-1034)")
def test_elicitation_sep1034_defaults(ctx: Context) -> CallToolResult | InputRequiredResult:
    form = _form("Please review and update the form fields with defaults", DEFAULTS_FORM)
    return _asked(ctx, "form", form, "Elicitation completed")


@mcp.tool(description="Elicits enums (SEP-1330)")
def test_elicitation_sep1330_enums(ctx: Context) -> CallToolResult | InputRequiredResult:
    form = _form("Please select options from the enum fields", ENUMS_FORM)
    return _asked(ctx, "form", form, "Elicitation completed")


@mcp.tool(description="SEP-1699 reconnection (nothing to close on a stateless server)")
def test_reconnection() -> str:
    return "Reconnection test completed successfully."


@mcp.tool(description="A custom header parameter (SEP-2243)")
def test_custom_header(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
) -> str:
    return f"region: {region}"


@mcp.tool(description="JSON Schema 2020-12 input (SEP-1613)")
def json_schema_2020_12_tool(name: str | None = None, address: dict[str, Any] | None = None) -> str:
    return f"JSON Schema 2020-12 tool called with: {json.dumps({'name': name, 'address': address})}"


# tools/list shows the raw 2020-12 schema, which pydantic's would not keep; calls are
# still validated against the function's own model.
_raw = mcp._tool_manager.get_tool("json_schema_2020_12_tool")
assert _raw is not None
_raw.parameters = SCHEMA_2020_12


@mcp.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    return base64.b64decode(IMAGE)


@mcp.resource("test://template/{id}/data", name="template", mime_type="application/json")
def template(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@mcp.prompt(description="No arguments")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@mcp.prompt(description="Two arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp.prompt(description="Embeds a resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[dict[str, Any]]:
    resource = {
        "uri": resourceUri,
        "mimeType": "text/plain",
        "text": "Embedded resource content for testing.",
    }
    return [
        {"role": "user", "content": {"type": "resource", "resource": resource}},
        {
            "role": "user",
            "content": {"type": "text", "text": "Please process the embedded resource above."},
        },
    ]


@mcp.prompt(description="An image")
def test_prompt_with_image() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": {"type": "image", "data": IMAGE, "mimeType": "image/png"}},
        {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["streamable-http"], default="streamable-http")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    mcp.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
