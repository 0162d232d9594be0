"""Interop server peer for the Python `mcp` SDK 1.x line (1.7 .. 1.30).

Run by a peer venv's interpreter (never imported by the project):

    python server_v1.py --transport streamable-http|sse|stdio --host 127.0.0.1 --port N

Built on the SDK's low-level `Server` with handlers registered per request
type (`Server.request_handlers`), which gives exact control over results
(isError, structuredContent, pagination) across the whole 1.x line.  Feature
differences between releases are detected from the installed package, never
from a hard-coded version table.
"""

from __future__ import annotations

import argparse
import base64
import inspect
import logging
import sys

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import McpError

# A 1x1 transparent PNG.
PNG_B64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)
NAMES = ["alice", "bob", "carol"]
PAGE_SIZE = 10
MANY = 25

HAS_OUTPUT_SCHEMA = "outputSchema" in types.Tool.model_fields
HAS_STRUCTURED = "structuredContent" in types.CallToolResult.model_fields
HAS_ELICIT = hasattr(types, "ElicitRequest")
# 1.7.x request params carry no cursor (and drop unknown fields): no pagination there.
CAN_PAGINATE = hasattr(types, "PaginatedRequestParams")

server: Server = Server("interop-python-v1")


def _accepts(fn, name: str) -> bool:
    return name in inspect.signature(fn).parameters


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def _tool(name: str, description: str, props: dict, required: list[str], output=None):
    kwargs = {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": props, "required": required},
    }
    if output is not None and HAS_OUTPUT_SCHEMA:
        kwargs["outputSchema"] = output
    return types.Tool(**kwargs)


def _tools() -> list[types.Tool]:
    tools = [
        _tool("echo", "Echo the text back", {"text": {"type": "string"}}, ["text"]),
        _tool(
            "add",
            "Add two integers",
            {"a": {"type": "integer"}, "b": {"type": "integer"}},
            ["a", "b"],
            output={
                "type": "object",
                "properties": {"sum": {"type": "integer"}},
                "required": ["sum"],
            },
        ),
        _tool("image", "Return a tiny PNG", {}, []),
        _tool("fail", "Always fails", {}, []),
    ]
    if HAS_ELICIT:
        tools.append(_tool("ask_name", "Elicit a name", {}, []))
    tools += [
        _tool("summarize", "Sample a summary", {"text": {"type": "string"}}, ["text"]),
        _tool("show_roots", "List the client's roots", {}, []),
        _tool("progress", "Report progress", {"steps": {"type": "integer"}}, ["steps"]),
        # The conformance suite's diagnostic (server-stateless): it needs sampling.
        _tool("test_missing_capability", "Needs the sampling capability", {}, []),
    ]
    return tools


def _result(content, *, is_error: bool = False, structured=None) -> types.ServerResult:
    kwargs = {"content": content, "isError": is_error}
    if structured is not None and HAS_STRUCTURED:
        kwargs["structuredContent"] = structured
    return types.ServerResult(types.CallToolResult(**kwargs))


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


async def list_tools(req: types.ListToolsRequest) -> types.ServerResult:
    return types.ServerResult(types.ListToolsResult(tools=_tools()))


async def call_tool(req: types.CallToolRequest) -> types.ServerResult:
    name = req.params.name
    args = req.params.arguments or {}
    if name == "echo":
        return _result([_text(f"echo: {args.get('text')}")])
    if name == "add":
        a, b = args.get("a"), args.get("b")
        if not (_is_int(a) and _is_int(b)):
            return _result([_text("add: a and b must be integers")], is_error=True)
        return _result([_text(str(a + b))], structured={"sum": a + b})
    if name == "image":
        return _result([types.ImageContent(type="image", data=PNG_B64, mimeType="image/png")])
    if name == "fail":
        return _result([_text("this tool always fails")], is_error=True)
    if name == "ask_name" and HAS_ELICIT:
        return await _ask_name()
    if name in ("summarize", "test_missing_capability"):
        return await _summarize(args)
    if name == "show_roots":
        roots = await server.request_context.session.list_roots()
        return _result([_text(",".join(str(r.uri) for r in roots.roots))])
    if name == "progress":
        return await _progress(req, args)
    return _result([_text(f"unknown tool: {name}")], is_error=True)


async def _ask_name() -> types.ServerResult:
    ctx = server.request_context
    kwargs = {}
    if _accepts(ctx.session.elicit, "related_request_id"):
        kwargs["related_request_id"] = ctx.request_id
    answer = await ctx.session.elicit(
        "What is your name?",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        **kwargs,
    )
    if answer.action == "accept" and answer.content:
        return _result([_text(f"hello {answer.content.get('name')}")])
    return _result([_text(f"no name ({answer.action})")])


async def _summarize(args: dict) -> types.ServerResult:
    ctx = server.request_context
    kwargs = {}
    if _accepts(ctx.session.create_message, "related_request_id"):
        kwargs["related_request_id"] = ctx.request_id
    sampled = await ctx.session.create_message(
        messages=[types.SamplingMessage(role="user", content=_text(str(args.get("text", ""))))],
        max_tokens=50,
        **kwargs,
    )
    content = sampled.content
    text = content.text if isinstance(content, types.TextContent) else str(content)
    return _result([_text(f"summary: {text}")])


async def _progress(req: types.CallToolRequest, args: dict) -> types.ServerResult:
    ctx = server.request_context
    session = ctx.session
    steps = args.get("steps")
    if not _is_int(steps):
        return _result([_text("progress: steps must be an integer")], is_error=True)
    token = req.params.meta.progressToken if req.params.meta else None
    progress_kwargs = {}
    if _accepts(session.send_progress_notification, "related_request_id"):
        progress_kwargs["related_request_id"] = str(ctx.request_id)
    log_kwargs = {}
    if _accepts(session.send_log_message, "related_request_id"):
        log_kwargs["related_request_id"] = ctx.request_id
    has_message = _accepts(session.send_progress_notification, "message")
    for i in range(1, steps + 1):
        if token is not None:
            extra = {"message": f"step {i}"} if has_message else {}
            await session.send_progress_notification(
                token, i, float(steps), **extra, **progress_kwargs
            )
        await session.send_log_message(level="info", data="working", **log_kwargs)
    return _result([_text(f"done {steps}")])


def _all_resources() -> list[types.Resource]:
    res = [
        types.Resource(uri="demo://text", name="text", mimeType="text/plain"),
        types.Resource(uri="demo://binary", name="binary", mimeType="application/octet-stream"),
    ]
    res += [
        types.Resource(uri=f"demo://many/{i}", name=f"many-{i}", mimeType="text/plain")
        for i in range(MANY)
    ]
    return res


async def list_resources(req: types.ListResourcesRequest) -> types.ServerResult:
    everything = _all_resources()
    # 1.7.x models have no params.cursor field; the wire value is an extra field there.
    cursor = getattr(req.params, "cursor", None) if req.params else None
    try:
        start = int(cursor) if cursor else 0
    except ValueError as exc:
        raise McpError(types.ErrorData(code=-32602, message="invalid cursor")) from exc
    if not CAN_PAGINATE:
        return types.ServerResult(types.ListResourcesResult(resources=everything))
    page = everything[start : start + PAGE_SIZE]
    nxt = str(start + PAGE_SIZE) if start + PAGE_SIZE < len(everything) else None
    return types.ServerResult(types.ListResourcesResult(resources=page, nextCursor=nxt))


async def list_templates(req: types.ListResourceTemplatesRequest) -> types.ServerResult:
    tpl = types.ResourceTemplate(
        uriTemplate="demo://items/{id}", name="item", mimeType="text/plain"
    )
    return types.ServerResult(types.ListResourceTemplatesResult(resourceTemplates=[tpl]))


async def read_resource(req: types.ReadResourceRequest) -> types.ServerResult:
    uri = str(req.params.uri)
    if uri == "demo://text":
        contents = [
            types.TextResourceContents(uri=uri, mimeType="text/plain", text="hello resource")
        ]
    elif uri == "demo://binary":
        blob = base64.b64encode(bytes(range(16))).decode()
        contents = [
            types.BlobResourceContents(uri=uri, mimeType="application/octet-stream", blob=blob)
        ]
    elif uri.startswith("demo://items/"):
        item = uri.removeprefix("demo://items/")
        contents = [types.TextResourceContents(uri=uri, mimeType="text/plain", text=f"item {item}")]
    elif uri.startswith("demo://many/"):
        item = uri.removeprefix("demo://many/")
        contents = [types.TextResourceContents(uri=uri, mimeType="text/plain", text=f"many {item}")]
    else:
        raise McpError(types.ErrorData(code=-32002, message=f"Resource not found: {uri}"))
    return types.ServerResult(types.ReadResourceResult(contents=contents))


GREET = types.Prompt(
    name="greet",
    description="Greet someone",
    arguments=[types.PromptArgument(name="name", description="Who to greet", required=True)],
)


async def list_prompts(req: types.ListPromptsRequest) -> types.ServerResult:
    return types.ServerResult(types.ListPromptsResult(prompts=[GREET]))


async def get_prompt(req: types.GetPromptRequest) -> types.ServerResult:
    if req.params.name != "greet":
        raise McpError(types.ErrorData(code=-32602, message=f"Unknown prompt: {req.params.name}"))
    name = (req.params.arguments or {}).get("name")
    if not name:
        raise McpError(types.ErrorData(code=-32602, message="Missing required argument: name"))
    msg = types.PromptMessage(role="user", content=_text(f"Hello, {name}!"))
    return types.ServerResult(types.GetPromptResult(description="Greeting", messages=[msg]))


async def complete(req: types.CompleteRequest) -> types.ServerResult:
    ref, arg = req.params.ref, req.params.argument
    values: list[str] = []
    if getattr(ref, "type", None) == "ref/prompt" and ref.name == "greet" and arg.name == "name":
        values = [n for n in NAMES if n.startswith(arg.value)]
    completion = types.Completion(values=values, total=len(values), hasMore=False)
    return types.ServerResult(types.CompleteResult(completion=completion))


async def set_level(req: types.SetLevelRequest) -> types.ServerResult:
    return types.ServerResult(types.EmptyResult())


server.request_handlers.update(
    {
        types.ListToolsRequest: list_tools,
        types.CallToolRequest: call_tool,
        types.ListResourcesRequest: list_resources,
        types.ListResourceTemplatesRequest: list_templates,
        types.ReadResourceRequest: read_resource,
        types.ListPromptsRequest: list_prompts,
        types.GetPromptRequest: get_prompt,
        types.CompleteRequest: complete,
        types.SetLevelRequest: set_level,
    }
)


def _init_options():
    return server.create_initialization_options()


async def run_stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, _init_options())


async def run_http(transport: str, host: str, port: int) -> None:
    import uvicorn
    from mcp.server.sse import SseServerTransport

    sse = SseServerTransport("/messages/")
    manager = None
    if transport == "streamable-http":
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        manager = StreamableHTTPSessionManager(app=server, event_store=None, json_response=False)

    async def not_found(send) -> None:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b"not found"})

    async def app(scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        path = scope.get("path", "")
        if manager is not None and path.rstrip("/") == "/mcp":
            await manager.handle_request(scope, receive, send)
        elif manager is None and path == "/sse":
            async with sse.connect_sse(scope, receive, send) as (read, write):
                await server.run(read, write, _init_options())
        elif manager is None and path.startswith("/messages/"):
            await sse.handle_post_message(scope, receive, send)
        else:
            await not_found(send)

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    if manager is not None:
        async with manager.run():
            await uvicorn.Server(config).serve()
    else:
        await uvicorn.Server(config).serve()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["streamable-http", "sse", "stdio"], required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    if args.transport == "stdio":
        anyio.run(run_stdio)
    else:
        if args.transport == "streamable-http":
            try:
                import mcp.server.streamable_http_manager  # noqa: F401
            except ImportError:
                sys.exit("streamable-http is not available in this SDK version")
        anyio.run(run_http, args.transport, args.host, args.port)


if __name__ == "__main__":
    main()
