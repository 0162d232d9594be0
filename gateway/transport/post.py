"""What a POST's handling needs of the HTTP server under it, and what it gives back.

Two servers carry POSTs: aiohttp's (every request) and the lane
(:mod:`gateway.transport.lane`, the usual Streamable HTTP POST).  The endpoint's
logic sees only these shapes, so both run the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

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
