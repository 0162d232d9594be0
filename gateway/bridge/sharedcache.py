"""Public list results shared by the replicas of a cluster, within their ``ttlMs``.

Only what a client is told it may share: a complete list result whose
``cacheScope`` is ``public`` (the upstream's own marking, else the route's
``cache_scope``) with a ``ttlMs`` above zero.  Anything private or unmarked is
never stored.  Keyed per route (and upstream) by the operation and its
parameters, never by a principal: a public result is the same for everyone.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

import orjson

from gateway.core import Call, Operation, ServerProfile
from gateway.core.jsonrpc import load_object

# The list operations whose public results may be shared.
SHARED_LISTS = frozenset(
    {
        Operation.TOOLS_LIST,
        Operation.RESOURCES_LIST,
        Operation.RESOURCES_TEMPLATES_LIST,
        Operation.PROMPTS_LIST,
    }
)
# A result bigger than this is served but not shared (bytes of JSON).
MAX_SHARED_BYTES = 256 * 1024
# A shared result lives at most this long, whatever ttlMs says (milliseconds).
MAX_SHARED_TTL_MS = 3_600_000


class SharedResults(Protocol):
    """Where shared results live (the cluster store)."""

    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, raw: bytes, ttl_ms: int) -> None: ...


def cache_key(call: Call) -> str:
    """The operation and its parameters (the cursor), as a digest."""
    params = orjson.dumps(call.params, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(call.method.encode() + b"\n" + params).hexdigest()


def public_ttl_ms(result: dict[str, Any], profile: ServerProfile) -> int:
    """How long ``result`` may be shared (0: never, it is not public)."""
    scope = result.get("cacheScope", profile.cache_scope)
    ttl = result.get("ttlMs", profile.cache_ttl_ms)
    if scope != "public" or not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0:
        return 0
    return min(ttl, MAX_SHARED_TTL_MS)


def load(raw: bytes | None) -> dict[str, Any] | None:
    return load_object(raw)
