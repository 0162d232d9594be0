"""Closed asyncio transports, freed by reference counting.

On Python 3.11 a selector socket transport keeps a bound method of itself
(``_read_ready_cb``) after it closed: a reference cycle (CPython gh-100348, fixed in
3.12) that only a full collection frees, which an idle gateway seldom runs.  Each
closed connection's transport and socket objects then stay, scattered through the
allocator's arenas, and keep the memory of everything freed around them from going
back to the system.  Those who own a connection drop the cycle when it is lost:
the lane, the h1 client, and aiohttp's server for the connections it serves.
uvloop's transports have no such cycle.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

_CYCLIC = sys.version_info < (3, 12)


def release(transport: asyncio.BaseTransport | None) -> None:
    """Drop a closed transport's reference to itself (nothing reads through it once it
    is closing: its reader is removed at close)."""
    if not _CYCLIC or transport is None or not transport.is_closing():
        return
    if getattr(transport, "_read_ready_cb", None) is not None:
        transport._read_ready_cb = None  # type: ignore[attr-defined]


def release_when_lost(server: Any) -> None:
    """An aiohttp ``web.Server``: the transport of each connection it served released
    as the connection is lost (its handlers are aiohttp's, with no hook of their own;
    the server is told first, while the handler still holds its transport)."""
    if not _CYCLIC:
        return
    lost = server.connection_lost

    def connection_lost(handler: Any, exc: BaseException | None = None) -> None:
        lost(handler, exc)
        release(handler.transport)

    server.connection_lost = connection_lost
