"""A stdio MCP server that serves files by ``file://`` URI, on the official Python SDK (1.x).

Run by a pinned peer interpreter (never imported by the project or the tests):

    python file_server.py ROOT

It resolves a URI the way file servers do (RFC 3986: scheme and host read without
regard to case, ``localhost`` the same as no host, the path percent-decoded and
normalised, ``..`` and doubled ``/`` resolved), then serves ROOT joined with that
path: so ``file:///public/../secret/key.txt`` is ``ROOT/secret/key.txt``.  Every
read it receives is written to stderr as ``file-server: read <uri>`` (the gateway
logs a stdio server's stderr), so a test can tell what reached it.
"""

from __future__ import annotations

import posixpath
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import McpError

ROOT = Path(sys.argv[1]).resolve()
server: Server = Server("file-server")


def resolve(uri: str) -> Path | None:
    parts = urlsplit(uri.strip())
    if parts.scheme.lower() != "file" or (parts.hostname or "localhost") != "localhost":
        return None
    path = posixpath.normpath("/" + unquote(parts.path).lstrip("/"))
    found = (ROOT / path.lstrip("/")).resolve()
    return found if found.is_relative_to(ROOT) and found.is_file() else None


async def list_resources(req: types.ListResourcesRequest) -> types.ServerResult:
    files = sorted(p for p in ROOT.rglob("*") if p.is_file())
    resources = [
        types.Resource(uri=f"file:///{p.relative_to(ROOT).as_posix()}", name=p.name) for p in files
    ]
    return types.ServerResult(types.ListResourcesResult(resources=resources))


async def read_resource(req: types.ReadResourceRequest) -> types.ServerResult:
    uri = str(req.params.uri)
    print(f"file-server: read {uri}", file=sys.stderr, flush=True)
    found = resolve(uri)
    if found is None:
        error = types.ErrorData(code=-32002, message="Resource not found", data={"uri": uri})
        raise McpError(error)
    text = types.TextResourceContents(uri=uri, text=found.read_text(), mimeType="text/plain")
    return types.ServerResult(types.ReadResourceResult(contents=[text]))


server.request_handlers[types.ListResourcesRequest] = list_resources
server.request_handlers[types.ReadResourceRequest] = read_resource


async def main() -> None:
    options = server.create_initialization_options()
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


if __name__ == "__main__":
    anyio.run(main)
