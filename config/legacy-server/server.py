"""A placeholder legacy MCP server for compose.yaml: Streamable HTTP with sessions,
`initialize` handshake, one `echo` tool.  Replace the `legacy` service with your
real server's image; only the gateway's `--route` needs to point at it."""

import json
import os
import signal
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The newest handshake-era revision this placeholder claims to speak.
REVISION = "2025-06-18"
SESSIONS: set[str] = set()
TOOL = {
    "name": "echo",
    "description": "Echo the text back",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


class Handler(BaseHTTPRequestHandler):
    def _send(self, status, body=None, headers=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_DELETE(self):
        SESSIONS.discard(self.headers.get("Mcp-Session-Id", ""))
        self._send(200)

    def do_GET(self):
        self._send(405, headers={"Allow": "POST, DELETE"})

    def do_POST(self):
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        method, id_ = message.get("method"), message.get("id")
        session = self.headers.get("Mcp-Session-Id")
        if method == "initialize":
            session = uuid.uuid4().hex
            SESSIONS.add(session)
            result = {
                "protocolVersion": REVISION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "legacy-placeholder", "version": "0"},
            }
            body = {"jsonrpc": "2.0", "id": id_, "result": result}
            self._send(200, body, {"Mcp-Session-Id": session})
        elif session not in SESSIONS:
            error = {"code": -32600, "message": "Bad Request: No valid session ID provided"}
            self._send(400, {"jsonrpc": "2.0", "id": None, "error": error})
        elif id_ is None:
            self._send(202)
        else:
            self._answer(method, id_, message)

    def _answer(self, method, id_, message):
        if method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": [TOOL]}
        elif method == "tools/call":
            text = str((message.get("params") or {}).get("arguments", {}).get("text", ""))
            result = {"content": [{"type": "text", "text": text}]}
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            self._send(200, {"jsonrpc": "2.0", "id": id_, "error": error})
            return
        self._send(200, {"jsonrpc": "2.0", "id": id_, "result": result})


if __name__ == "__main__":
    # As PID 1 in a container a signal without a handler is ignored: stop on SIGTERM.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ThreadingHTTPServer(("0.0.0.0", int(os.environ.get("PORT", "3000"))), Handler).serve_forever()
