"""A tiny handshake-era (2025-11-25) MCP server over stdio, for `bench.idle`'s stdio children.

    python -m bench.stdio_echo

One JSON-RPC message a line on stdin, answers on stdout: ``initialize``,
``ping``, ``tools/list`` (one tool, ``echo``) and ``tools/call echo``; every
notification is read and ignored.  Standard library only, so a child costs
what a small Python process costs, not what the gateway's imports do.
"""

from __future__ import annotations

import json
import sys
from typing import Any

VERSION = "2025-11-25"
ECHO = {
    "name": "echo",
    "description": "Echo text back",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    id_ = message.get("id")
    method = message.get("method")
    if id_ is None or method is None:
        return None  # a notification, or a client's answer
    params = message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bench-stdio-echo", "version": "0"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [ECHO]}
    elif method == "tools/call" and params.get("name") == "echo":
        text = str((params.get("arguments") or {}).get("text", ""))
        result = {"content": [{"type": "text", "text": text}]}
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return {"jsonrpc": "2.0", "id": id_, "error": error}
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        reply = answer(message) if isinstance(message, dict) else None
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
