"""Interop server peer for the Python `mcp` SDK 2.x line (serves 2026-07-28 and, on the
same endpoint, the handshake era up to 2025-11-25).

    python server_v2.py --transport streamable-http|sse|stdio --host 127.0.0.1 --port N

Built on `MCPServer`.  Server-to-client requests (elicitation, sampling, roots) use
`Resolve(...)` dependencies, which the SDK turns into an `InputRequiredResult` round
trip on 2026-07-28 and into ordinary mid-call requests on earlier revisions.
`resources/list` pagination is not expressible through MCPServer's public API, so
this server lists everything on one page.
"""

from __future__ import annotations

import argparse
import base64
import logging
import sys
from typing import Annotated

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import (
    CallToolResult,
    Completion,
    CreateMessageResult,
    ListRootsResult,
    PromptReference,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)
NAMES = ["alice", "bob", "carol"]
MANY = 25

mcp = MCPServer("interop-python-v2", log_level="WARNING")


class Sum(BaseModel):
    sum: int


class Name(BaseModel):
    name: str


def _text(text: str) -> TextContent:
    return TextContent(type="text", text=text)


@mcp.tool(description="Echo the text back")
def echo(text: str) -> str:
    return f"echo: {text}"


@mcp.tool(description="Add two integers")
def add(a: int, b: int) -> Annotated[CallToolResult, Sum]:
    return CallToolResult(content=[_text(str(a + b))], structured_content={"sum": a + b})


@mcp.tool(description="Return a tiny PNG")
def image() -> Image:
    return Image(data=PNG, format="png")


@mcp.tool(description="Always fails")
def fail() -> CallToolResult:
    return CallToolResult(content=[_text("this tool always fails")], is_error=True)


def _ask() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@mcp.tool(description="Elicit a name")
def ask_name(answer: Annotated[ElicitationResult[Name], Resolve(_ask)]) -> str:
    if isinstance(answer, AcceptedElicitation):
        return f"hello {answer.data.name}"
    return f"no name ({answer.action})"


def _sample(text: str) -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=_text(text))],
        max_tokens=50,
    )


@mcp.tool(description="Sample a summary")
def summarize(text: str, sampled: Annotated[CreateMessageResult, Resolve(_sample)]) -> str:
    content = sampled.content
    out = content.text if isinstance(content, TextContent) else str(content)
    return f"summary: {out}"


def _roots() -> ListRoots:
    return ListRoots()


@mcp.tool(description="List the client's roots")
def show_roots(roots: Annotated[ListRootsResult, Resolve(_roots)]) -> str:
    return ",".join(str(r.uri) for r in roots.roots)


@mcp.tool(description="Report progress")
async def progress(steps: int, ctx: Context) -> str:
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
        await ctx.info("working")
    return f"done {steps}"


@mcp.resource("demo://text", name="text", mime_type="text/plain")
def text_resource() -> str:
    return "hello resource"


@mcp.resource("demo://binary", name="binary", mime_type="application/octet-stream")
def binary_resource() -> bytes:
    return bytes(range(16))


@mcp.resource("demo://items/{id}", name="item", mime_type="text/plain")
def item(id: str) -> str:
    return f"item {id}"


def _many(i: int):
    def read() -> str:
        return f"many {i}"

    return read


for _i in range(MANY):
    mcp.resource(f"demo://many/{_i}", name=f"many-{_i}", mime_type="text/plain")(_many(_i))


@mcp.prompt(description="Greet someone")
def greet(name: str) -> str:
    return f"Hello, {name}!"


@mcp.completion()
async def complete(ref, argument, context):
    if isinstance(ref, PromptReference) and ref.name == "greet" and argument.name == "name":
        values = [n for n in NAMES if n.startswith(argument.value)]
        return Completion(values=values, total=len(values), has_more=False)
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["streamable-http", "sse", "stdio"], required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    if args.transport == "stdio":
        mcp.run("stdio")
    else:
        mcp.run(args.transport, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
