"""stdio line framing: one JSON-RPC message (or batch) per newline-terminated line."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.core.jsonrpc import valid_id

# How much is read from a pipe at once; lines are assembled from these chunks,
# so a line may be far longer than asyncio's StreamReader limit.
CHUNK = 64 * 1024
# How much of a dropped line is kept: enough for the envelope JSON-RPC libraries write
# before a result (``{"jsonrpc":"2.0","id":...,"result":``).
HEAD = 256
_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


def encode_line(message: Any) -> bytes:
    """One JSON-RPC message (or batch) as one line.  orjson escapes every newline
    inside strings and adds none of its own, so the line has exactly one."""
    return orjson.dumps(message) + b"\n"


@dataclass(frozen=True, slots=True)
class Oversized:
    """Stands for a line longer than the limit, which was dropped unread but for its
    first :data:`HEAD` bytes."""

    size: int
    head: bytes = b""


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


async def iter_lines(
    read: Callable[[int], Awaitable[bytes]], max_line: int, *, truncate: bool = False
) -> AsyncIterator[bytes | Oversized]:
    """The newline-terminated lines of a byte stream (without the newline).

    Memory stays bounded by ``max_line`` plus one chunk whatever the stream
    sends.  A longer line is dropped and reported as :class:`Oversized`, or
    with ``truncate`` yielded as its first ``max_line`` bytes.  A last line
    without a newline is yielded at the end of the stream.
    """
    buf = bytearray()
    skipped = -1  # bytes of the current (too long) line dropped so far; -1: not dropping
    head = b""  # the dropped line's first HEAD bytes
    while chunk := await read(CHUNK):
        pos = 0
        size = len(chunk)
        while pos < size:
            newline = chunk.find(b"\n", pos)
            end = size if newline < 0 else newline
            if skipped >= 0:
                skipped += end - pos
            else:
                buf += chunk[pos:end]
                if len(buf) > max_line:
                    head = bytes(buf[:HEAD])
                    if truncate:
                        yield bytes(buf[:max_line])
                    skipped = len(buf) - (max_line if truncate else 0)
                    buf = bytearray()  # let the memory go, not just the length
            if newline < 0:
                break
            if skipped >= 0:
                if not truncate:
                    yield Oversized(skipped, head)
                skipped = -1
            else:
                yield bytes(buf)
                buf.clear()
            pos = newline + 1
    if skipped >= 0:
        if not truncate:
            yield Oversized(skipped, head)
    elif buf:
        yield bytes(buf)
