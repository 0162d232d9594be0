"""Spent-state markers that outlive a failover: each is confirmed by a replica of the
store (``WAIT 1``) once the primary has been seen with one.

Why: a primary cut off by a failover (stalled, then back, still taking writes until
the sentinels demote it) takes markers that its resync then wipes, and a finished
round becomes replayable.  A marker no replica holds is not a spent state: the round
is not finished (the client is told to send it again, a 503) and the marker goes.

When no replica confirms, the store finds out why before the next marker:

- the primary still has a replica attached (stalled, or lagging): markers keep
  waiting for it (each a 503 until it answers);
- the primary has no replica now and is still the primary (its replica died, or a
  failover left the new primary alone): markers go on, on that one server, with a
  warning, until a replica attaches again (looked for every ``LOOK_EVERY`` s);
- the primary is no longer the primary: its connections are dropped (Sentinel), or
  the cluster's map of slots is read again (Redis Cluster).

On a Redis Cluster each marker is written and waited for on one connection to the
primary of its key's slot (``WAIT`` counts the replicas holding that connection's
writes; redis-py would send a keyless ``WAIT`` to every primary).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

log = structlog.get_logger(__name__)

# How long a marker waits for a replica of the store to hold it (WAIT).
CONFIRM_MS = 1000
# While the primary has shown no replica, how often it is asked again (seconds).
LOOK_EVERY = 5.0


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
    ``moved``: the primary changed (connections moved, or the slots re-read)."""

    def __init__(self, confirm: bool) -> None:
        self.confirm = confirm
        self._primaries: dict[str, Primary] = {}

    def moved(self) -> None:
        """The primaries changed: each new one is looked at afresh."""
        self._primaries.clear()

    async def spend(
        self,
        primary: str,
        write: Callable[[bool], Awaitable[tuple[Any, Any]]],
        replicas: Callable[[], Awaitable[int | None]],
        forget: Callable[[], Awaitable[None]],
        moved: Callable[[], Awaitable[None]],
    ) -> bool:
        """Whether the marker was new (the state is spent now); Unconfirmed when no
        replica holds it where one must."""
        known = self._primaries.setdefault(primary, Primary())
        confirm = self.confirm and await self._has_replicas(known, replicas)
        spent, held_by = await write(confirm)
        if isinstance(spent, Exception):
            raise spent
        if not spent or not confirm:
            return bool(spent)
        if not isinstance(held_by, Exception) and int(held_by) >= 1:
            return True
        await forget()  # not spent after all: a failover now could lose it
        await self._why_unconfirmed(known, replicas, moved)
        raise Unconfirmed("no replica of the cluster store confirmed the spent state")

    async def _has_replicas(
        self, known: Primary, replicas: Callable[[], Awaitable[int | None]]
    ) -> bool:
        if known.had_replicas:
            return True
        now = time.monotonic()
        if now - known.looked_at >= LOOK_EVERY:  # none yet: looked at now and then
            known.looked_at = now
            known.had_replicas = bool(await replicas())
        return known.had_replicas

    async def _why_unconfirmed(
        self,
        known: Primary,
        replicas: Callable[[], Awaitable[int | None]],
        moved: Callable[[], Awaitable[None]],
    ) -> None:
        try:
            attached = await replicas()
        except Exception:  # the store is failing: the next marker finds out more
            return
        if attached is None:  # no longer the primary: its markers would be wiped
            self.moved()
            await moved()
        elif attached == 0:
            known.had_replicas = False
            known.looked_at = time.monotonic()
            log.warning(
                "the cluster store's primary has no replica: spent states are kept on "
                "that one server until a replica attaches"
            )
