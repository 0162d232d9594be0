"""The page a browser gets: a GET that asks for HTML and carries no MCP header, on a
route or on ``/``.  What this is, its routes, how a client connects; never a stream
that keeps the page loading."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape

from aiohttp import web

MCP_HEADERS = ("mcp-session-id", "mcp-protocol-version", "last-event-id")


def wants_page(headers: Mapping[str, str]) -> bool:
    """A browser's navigation: HTML asked for, no event stream, no MCP header."""
    accept = headers.get("accept", "")
    return (
        "text/html" in accept
        and "text/event-stream" not in accept
        and not any(name in headers for name in MCP_HEADERS)
    )


def page(request: web.Request, paths: Iterable[str]) -> web.Response:
    """The short HTML page naming ``paths`` as this gateway's MCP endpoints."""
    origin = f"{request.scheme}://{request.host}"
    items = "\n".join(f"<li><code>{escape(origin + path)}</code></li>" for path in sorted(paths))
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>MCP gateway</title></head>
<body>
<h1>MCP gateway</h1>
<p>This is an MCP (Model Context Protocol) gateway: it lets
an MCP client of any protocol revision use the MCP servers behind it. It is not a web
site: its endpoints answer MCP clients, not browsers.</p>
<h2>Endpoints</h2>
<ul>
{items or "<li>none</li>"}
</ul>
<h2>Connecting a client</h2>
<p>Give your MCP client one of the URLs above as a Streamable HTTP server (clients of the
older HTTP+SSE transport use the same URL). For example:</p>
<pre>npx @modelcontextprotocol/inspector</pre>
<p>then choose “Streamable HTTP” and paste the URL.</p>
</body></html>
"""
    return web.Response(
        text=body,
        content_type="text/html",
        headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
    )
