"""The pass-through lane: a call that needs no translation skips the full path.

A client and an upstream of the same revision need nothing of the gateway between
them but what a proxy does and what the route asks (credentials, quotas, the log
and metrics).  So, decided per call, one that qualifies is sent upstream at once
(gateway/upstream/passthrough.py) and its plain result answered as the upstream
wrote it; the rest of what the full path does -- sessions of the gateway's own,
translation, the route's policy, questions, tasks, retries -- is not needed for it.

A call qualifies when the route allows it (``--pass-through``, the default) and
nothing would rewrite the call or its answer: no policy, no console recording
bodies, no tracing, one upstream target; a request of an operation its revision
passes (``Adapter.verbatim_operations``), carrying no state, answers or task; and
the upstream known to speak the client's revision or one of the other era
(:func:`pair`), with somewhere to send it at once (the link decides: a stateless
upstream's Streamable HTTP, a handshake-era client session's own upstream session
once open, a stateless client's pool once open and ready).  Whatever the upstream answers
that is not a plain result goes on through the full path from where the lane
stopped, so the client hears what the full path would have said
(docs/using/operations.md, "The pass-through lane").
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.bridge.backend import Held
from gateway.core import Call, tracing
from gateway.protocol import Adapter, AdapterSet
from gateway.transport.route import Route


def pair(adapters: AdapterSet, client: Adapter, upstream: str | None) -> bool:
    """Whether the lane carries a call of ``client``'s revision to an upstream of
    ``upstream``'s: the same revision, or one of the other era.  A plain result is then
    read by the upstream's adapter and encoded by the client's, as on the full path.
    A handshake-era client's call to a stateless upstream needs no session of the
    gateway's; a stateless client's call to a handshake-era upstream goes on the
    client's pool when it is open and needs nothing first (the link decides): at
    once, or, where the pool's server may ask off the call's stream (it offers a
    stream of its own), from a parked call's task, so that such a question is put to
    the client as on the full path.  Two handshake-era revisions are the full path's.
    Of the handshake era only revisions with verbatim operations ever get here:
    :func:`qualifies` asks first."""
    if upstream == client.version:
        return True
    if client.has_handshake:
        return adapters.names_stateless(upstream)
    return adapters.names_handshake(upstream)


def qualifies(route: Route, adapter: Adapter, call: Call) -> bool:
    """Whether ``call`` may take the lane (the upstream side has its say after)."""
    return (
        route.pass_through
        and route.policy is None
        and route.console is None
        and tracing.active is None
        and call.id is not None
        and call.state is None
        and not call.answers
        and not call.client.tasks
        and "task" not in call.params
        and call.operation in adapter.verbatim_operations
    )


async def abandon(task: asyncio.Future[Any]) -> None:
    """A reply the lane held for a request that is gone: nobody reads it."""
    if task.done() and not task.cancelled() and isinstance(task.result(), Held):
        await task.result().abandon()
