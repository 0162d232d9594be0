"""JSON-RPC 2.0 framing helpers shared by every layer (no MCP revision in here)."""

from __future__ import annotations

from typing import Any

import orjson

Message = dict[str, Any]


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def load_object(raw: bytes | None) -> dict[str, Any] | None:
    """A stored JSON object, or None when missing, unreadable or not an object."""
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def dumps(message: Any) -> bytes:
    return orjson.dumps(message)


# A request or notification names its method with a string (JSON-RPC 2.0, section 4);
# anything else is neither, so no reader takes it for one and passes it on.
def is_request(message: Any) -> bool:
    return isinstance(message, dict) and isinstance(message.get("method"), str) and "id" in message


def is_notification(message: Any) -> bool:
    return (
        isinstance(message, dict) and isinstance(message.get("method"), str) and "id" not in message
    )


def is_response(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and "method" not in message
        and "id" in message
        and ("result" in message or "error" in message)
    )


def request(id_: str | int, method: str, params: dict[str, Any] | None = None) -> Message:
    message: Message = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: dict[str, Any] | None = None) -> Message:
    message: Message = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def result(id_: str | int | None, value: dict[str, Any]) -> Message:
    return {"jsonrpc": "2.0", "id": id_, "result": value}


def error(id_: str | int | None, code: int, message: str, data: Any = None) -> Message:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": body}


def valid_id(value: Any) -> bool:
    """JSON-RPC ids MCP accepts: strings and integers (never null, bool or float)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
