"""stdio line framing: one JSON-RPC message (or batch) per newline-terminated line."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

# How much is read from a pipe at once; lines are assembled from these chunks,
# so a line may be far longer than asyncio's StreamReader limit.
CHUNK = 64 * 1024
# How much of a dropped line is kept: enough for the envelope JSON-RPC libraries write
# before a result (``{"jsonrpc":"2.0","id":...,"result":``).
HEAD = 256


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
