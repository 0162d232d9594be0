"""JSON-RPC pieces the fake upstreams share: messages, an SSE frame, what an answer
to an upstream's question said."""

from __future__ import annotations

import json
from typing import Any


def _rpc_error(id_: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def _rpc_result(id_: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def _sse(message: dict[str, Any]) -> bytes:
    return f"event: message\ndata: {json.dumps(message)}\n\n".encode()


def _refusal(answer: dict[str, Any]) -> bool:
    result = answer.get("result")
    if "error" in answer or not isinstance(result, dict):
        return True
    return result.get("action") in ("cancel", "decline")


def _answer_text(method: str, answer: dict[str, Any]) -> str:
    result = answer.get("result")
    if not isinstance(result, dict):
        return "error"
    if method == "sampling/createMessage":
        content = result.get("content")
        return str(content.get("text")) if isinstance(content, dict) else "?"
    if result.get("action") != "accept":
        return str(result.get("action"))
    content = result.get("content")
    values = content.values() if isinstance(content, dict) else ()
    return " ".join(str(v) for v in values)
