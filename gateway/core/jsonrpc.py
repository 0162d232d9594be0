"""JSON-RPC 2.0 framing helpers shared by every layer (no MCP revision in here)."""

from __future__ import annotations

import json
from typing import Any

import orjson

Message = dict[str, Any]
_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


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


def response_id(head: bytes) -> str | int | None:
    """The id of the response a JSON line begins with, when its beginning says so:
    a top-level ``"id"`` before ``"result"`` or ``"error"``, with no ``"method"`` (a
    request of the server's, whose id is in the server's numbering) and no nested
    value before them.  None when the head does not show all that."""
    text = head.decode("utf-8", errors="ignore")
    pos = _skip(text, 0)
    if text[pos : pos + 1] != "{":
        return None
    found: Any = None
    while True:
        try:
            key, pos = _DECODER.raw_decode(text, _skip(text, pos + 1))
        except ValueError:
            return None
        pos = _skip(text, pos)
        if not isinstance(key, str) or text[pos : pos + 1] != ":":
            return None
        if key in ("result", "error"):
            return found if valid_id(found) else None
        if key == "method":
            return None
        pos = _skip(text, pos + 1)
        if text[pos : pos + 1] in ("{", "["):
            return None  # nested: where it ends is past what can be read here
        try:
            value, pos = _DECODER.raw_decode(text, pos)
        except ValueError:
            return None
        pos = _skip(text, pos)
        if text[pos : pos + 1] != ",":  # also: a value the head cut short
            return None
        if key == "id":
            found = value


def _skip(text: str, pos: int) -> int:
    while text[pos : pos + 1] and text[pos] in _SPACE:
        pos += 1
    return pos
