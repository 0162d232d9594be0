"""Spent-state markers that outlive a failover: each is confirmed by a replica of the
store (``WAIT 1``) once the primary has been seen with one.

Why: a primary cut off by a failover (stalled, then back, still taking writes until
the sentinels demote it) takes markers that its resync then wipes, and a finished
round becomes replayable.  A marker no replica holds is not a spent state: the round
is not finished (the client is told to send it again, a 503) and the marker goes.

When no replica confirms, the store finds out why before the next marker:

- the primary still has a replica attached (stalled, or lagging): markers keep
  waiting for it (each a 503 until it answers);
- the primary has no replica now, is still the primary, and no healthy replica is
  known that a failover could promote (its replica died): markers go on, on that one
  server, with a warning, until a replica attaches again (looked at every
  ``LOOK_EVERY`` s); while a replica that could be promoted is known (cut off from
  it, not dead: a failover may yet make this primary a stale one), each marker is a
  503 instead.  A primary never seen with a replica (one Redis; or one a failover
  promoted, its old primary gone) takes markers alone from the start;
- the primary is no longer the primary: its connections are dropped (Sentinel), or
  the cluster's map of slots is read again (Redis Cluster).

On a Redis Cluster each marker is written and waited for on one connection to the
primary of its key's slot (``WAIT`` counts the replicas holding that connection's
writes; redis-py would send a keyless ``WAIT`` to every primary).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from typing import Any, Protocol

import structlog

log = structlog.get_logger(__name__)

# How long a marker waits for a replica of the store to hold it (WAIT).
CONFIRM_MS = 1000
# While the primary has shown no replica, how often it is asked again (seconds): how
# long markers may go on alone before the store looks whether that is still safe.
LOOK_EVERY = 1.0


class Unconfirmed(Exception):
    """A write that must outlive a failover was not confirmed by a replica."""


class Primary:
    """What the store knows of one primary (a Redis Cluster has one per shard)."""

    __slots__ = ("had_replicas", "looked_at")

    def __init__(self) -> None:
        self.had_replicas = False
        self.looked_at = -math.inf


class Markers:
    """The confirmation rule, over whichever client the store has.  ``write``: SET NX
    then ``WAIT 1`` on one connection, returning both replies; ``replicas``: how many
    replicas the primary has attached now, or None when it is no longer a primary;
    ``alone``: whether no failover could promote another server now (no healthy
    replica is known), so markers may go on this one alone; ``forget``: take this
    marker back if it is the one this call wrote; ``moved``: the primary changed."""

    def __init__(self, confirm: bool) -> None:
        self.confirm = confirm
        self._primaries: dict[str, Primary] = {}

    def moved(self) -> None:
        """The primaries changed: each new one is looked at afresh."""
        self._primaries.clear()

    async def spend(self, primary: str, store: MarkerStore) -> bool:
        """Whether the marker was new (the state is spent now); Unconfirmed when no
        replica holds it where one must.  A write that fails after its SET may have
        landed takes the marker back (only this call's: a replay stays spent)."""
        known = self._primaries.setdefault(primary, Primary())
        confirm = self.confirm and await self._must_confirm(known, store)
        try:
            spent, held_by = await store.write(confirm)
        except BaseException:
            await _taken_back(store)
            raise
        if isinstance(spent, Exception):
            raise spent
        if not spent or not confirm:
            return bool(spent)
        if not isinstance(held_by, Exception) and int(held_by) >= 1:
            return True
        await _taken_back(store)  # not spent after all: a failover now could lose it
        await self._why_unconfirmed(known, store)
        raise Unconfirmed("no replica of the cluster store confirmed the spent state")

    async def _must_confirm(self, known: Primary, store: MarkerStore) -> bool:
        """Whether this marker waits for a replica; Unconfirmed when the primary may
        not take it at all now (no longer the primary, or alone while a failover
        could still promote another)."""
        if known.had_replicas:
            return True
        now = time.monotonic()
        if now - known.looked_at < LOOK_EVERY:
            return False  # alone, and looked at a moment ago
        known.looked_at = now
        attached = await store.replicas()
        if attached is None:
            self.moved()
            await store.moved()
            raise Unconfirmed("the cluster store's server is no longer its primary")
        # A primary never seen with a replica (one Redis, or one promoted alone) takes
        # markers alone; one that lost its replicas does so only once none could be
        # promoted (see _why_unconfirmed).
        known.had_replicas = attached > 0
        return known.had_replicas

    async def _why_unconfirmed(self, known: Primary, store: MarkerStore) -> None:
        try:
            attached = await store.replicas()
            alone = attached == 0 and await store.alone()
        except Exception:  # the store is failing: the next marker finds out more
            return
        if attached is None:  # no longer the primary: its markers would be wiped
            self.moved()
            await store.moved()
        elif alone:
            known.had_replicas = False
            known.looked_at = time.monotonic()
            log.warning(
                "the cluster store's primary has no replica: spent states are kept on "
                "that one server until a replica attaches"
            )


class MarkerStore(Protocol):
    """What the rule needs of a store for one marker."""

    async def write(self, confirm: bool) -> tuple[Any, Any]: ...

    async def replicas(self) -> int | None: ...

    async def alone(self) -> bool: ...

    async def forget(self) -> None: ...

    async def moved(self) -> None: ...


async def _taken_back(store: MarkerStore) -> None:
    """Best effort, and not cut short by the caller's cancellation."""
    with contextlib.suppress(Exception):
        await asyncio.shield(store.forget())
