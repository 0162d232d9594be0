"""What the transport reads off an aiohttp request that a middleware put there: typed
request keys (aiohttp's own ``RequestKey``, so nothing else can collide with them)."""

from __future__ import annotations

from aiohttp import web

from gateway.core import Failure

# The cluster's middleware could not look up the replica a request belongs to: the
# failure the transport words in the client's revision (not "session not found").
OWNER_UNKNOWN = web.RequestKey("owner_unknown", Failure)
# The request's id, as the request-id middleware bound it to the log context.
REQUEST_ID = web.RequestKey("request_id", str)
