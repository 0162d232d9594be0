"""What a POST's handling needs of the HTTP server under it, and what it gives back.

Two servers carry POSTs: aiohttp's (every request) and the lane
(:mod:`gateway.transport.lane`, the usual Streamable HTTP POST).  The endpoint's
logic sees only these shapes, so both run the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import orjson

from gateway.auth.front import RequestView


@dataclass(slots=True)
class WholeAnswer:
    """An answer sent in one piece: status, headers and body."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    content_type: str | None = None


class Sink(Protocol):
    """An answer streamed (SSE): its headers go out with the first write."""

    async def write(self, data: bytes) -> None: ...

    async def write_eof(self, data: bytes = b"") -> None: ...


class PostRequest(RequestView, Protocol):
    """One POST as the endpoint reads it (the auth side reads its headers, scheme and
    host)."""

    @property
    def lowered(self) -> dict[str, str]:
        """The headers by lower-case name (one value each)."""
        ...

    @property
    def remote(self) -> str | None: ...

    @property
    def content_length(self) -> int | None: ...

    def query(self, name: str) -> str | None: ...

    async def body(self, limit: int, within: float) -> bytes | None:
        """At most ``limit`` bytes of the body (more: over the limit); None when it
        did not arrive within ``within`` seconds."""
        ...

    async def open_stream(self, headers: dict[str, str]) -> Sink:
        """The answer as a 200 SSE stream with ``headers``."""
        ...


def gateway_fault(request_id: str | None) -> WholeAnswer:
    """The answer to a request the gateway itself failed on (a bug, logged with its
    traceback): a JSON-RPC internal error naming the request id the log line has,
    never an HTTP 500 and never the exception's text."""
    ref = f" (request id {request_id})" if request_id else ""
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32603, "message": f"the gateway failed on this request{ref}"},
    }
    return WholeAnswer(200, {}, orjson.dumps(body), "application/json")
