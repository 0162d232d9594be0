"""Owner look-ups shared by the requests that ask at once.

Every request that belongs to another replica asks the store where that replica
is.  The requests that ask about the same replica while a look-up is under way
share it: a flood of relayed requests (whoever sends it: relaying happens before
any per-caller quota) costs the store one look-up per owner at a time, not one
per request, so it cannot fill the store's connection pool that everyone's
operations wait on.
"""

from __future__ import annotations

import asyncio

from gateway.cluster.store import ClusterStore, Replica


class OwnerLookups:
    def __init__(self, store: ClusterStore) -> None:
        self.store = store
        self._asking: dict[str, asyncio.Task[Replica | None]] = {}

    async def replica(self, replica_id: str) -> Replica | None:
        """The live replica ``replica_id`` (raises what the store raised)."""
        task = self._asking.get(replica_id)
        if task is None:
            task = asyncio.ensure_future(self.store.replica(replica_id))
            self._asking[replica_id] = task
            task.add_done_callback(lambda done: self._done(replica_id, done))
        # Shielded: one asker that gives up (its client went away) ends nobody else's.
        return await asyncio.shield(task)

    def _done(self, replica_id: str, task: asyncio.Task[Replica | None]) -> None:
        self._asking.pop(replica_id, None)
        if not task.cancelled():
            task.exception()  # retrieved: every asker may have given up before it ended
