"""A stdio MCP server that pages its tool list, on the official Python SDK (1.x).

Run by a pinned peer interpreter (never imported by the project or the tests):

    python paged_server.py

Thirty tools, ``echo`` and ``add`` first, then ``tool_00`` ... ``tool_27``, listed
``PAGE_SIZE`` to a page (the cursor is the next index).  Every tools/call it
receives is written to stderr as ``paged-server: tools/call <name>`` (the gateway
logs a stdio server's stderr), then answered ``called <name>``.  It lists no
prompts and no resources, but says it has both (some clients print a warning on
stdout otherwise, where their drivers print their report).
"""

from __future__ import annotations

import sys

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import McpError

PAGE_SIZE = 3
NAMES = ["echo", "add", *(f"tool_{i:02}" for i in range(28))]

server: Server = Server("paged-tools")


def _tool(name: str) -> types.Tool:
    return types.Tool(
        name=name,
        description=f"The tool {name}",
        inputSchema={"type": "object", "properties": {}},
    )


async def list_tools(req: types.ListToolsRequest) -> types.ServerResult:
    cursor = req.params.cursor if req.params is not None else None
    try:
        start = int(cursor) if cursor else 0
    except ValueError as exc:
        raise McpError(types.ErrorData(code=-32602, message="invalid cursor")) from exc
    page = [_tool(name) for name in NAMES[start : start + PAGE_SIZE]]
    more = start + PAGE_SIZE < len(NAMES)
    return types.ServerResult(
        types.ListToolsResult(tools=page, nextCursor=str(start + PAGE_SIZE) if more else None)
    )


async def call_tool(req: types.CallToolRequest) -> types.ServerResult:
    name = req.params.name
    print(f"paged-server: tools/call {name}", file=sys.stderr, flush=True)
    if name not in NAMES:
        raise McpError(types.ErrorData(code=-32602, message=f"Unknown tool: {name}"))
    text = types.TextContent(type="text", text=f"called {name}")
    return types.ServerResult(types.CallToolResult(content=[text]))


async def list_prompts(req: types.ListPromptsRequest) -> types.ServerResult:
    return types.ServerResult(types.ListPromptsResult(prompts=[]))


async def list_resources(req: types.ListResourcesRequest) -> types.ServerResult:
    return types.ServerResult(types.ListResourcesResult(resources=[]))


async def list_templates(req: types.ListResourceTemplatesRequest) -> types.ServerResult:
    return types.ServerResult(types.ListResourceTemplatesResult(resourceTemplates=[]))


server.request_handlers.update(
    {
        types.ListToolsRequest: list_tools,
        types.CallToolRequest: call_tool,
        types.ListPromptsRequest: list_prompts,
        types.ListResourcesRequest: list_resources,
        types.ListResourceTemplatesRequest: list_templates,
    }
)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
