"""This replica as a member of a cluster: registry, heartbeat, ownership, relaying, drain.

A request that belongs to a session or a parked call of another live replica
is relayed to it (see :mod:`gateway.cluster.relay`); one whose owner is gone
is answered here, where that session or call is unknown: a 404 for a session,
"start the call again" for a parked call.  One whose owner cannot be looked up
(the store is down, or busy past its pool's timeout) is neither: the owner may
be alive, so the request is marked (``OWNER_UNKNOWN``) and the transport answers
a 503 to send it again, in the client's revision.  A draining replica takes no
new work: what is not its own is relayed to a replica that is not draining.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from aiohttp import web
from aiohttp.streams import StreamReader

from gateway.bridge.state import StateSealer
from gateway.cluster.lookups import OwnerLookups
from gateway.cluster.owner import parked_owner, session_owner, session_prefix, task_owner
from gateway.cluster.relay import RELAY_HEADER, Relay, Unreached, relay_key, verify
from gateway.cluster.store import ClusterStore, Replica
from gateway.cluster.verdicts import RouteResults, VerdictShare
from gateway.core import Failure, FailureKind
from gateway.transport.marks import OWNER_UNKNOWN

log = structlog.get_logger(__name__)
# How long leaving waits for the heartbeat task to end once cancelled.
LEAVE_GRACE = 2.0
# What a request refused because the store did not answer says to wait (seconds).
STORE_RETRY_AFTER = 1
# How long a relay to a registered owner that refuses connections is tried again
# before the client is told to send its request again (seconds).
RELAY_PATIENCE = 2.0

Handler = Callable[[web.Request], Any]
SESSION_QUERY = "sessionId"


@dataclass
class RouteEntry:
    max_body: int
    sealer: StateSealer


class ClusterNode:
    """One replica's membership; its middleware sends foreign requests to their owner."""

    def __init__(
        self,
        store: ClusterStore,
        state_key: bytes,
        *,
        replica_id: str | None = None,
        heartbeat_ttl: float = 10.0,
        relay_timeout: float = 300.0,
    ) -> None:
        self.store = store
        self.id = replica_id or secrets.token_hex(6)
        self.url = ""
        self.heartbeat_ttl = heartbeat_ttl
        # When this replica last found the store's registry lost (loop time).
        self._forgot_at = -math.inf
        self._announced = False  # once: a registration then missing means a lost store
        self._registering = False  # a registration sent (it may have landed): undo it
        self.draining = False
        self.routes: dict[str, RouteEntry] = {}
        self.verdicts = VerdictShare(store)
        self.lookups = OwnerLookups(store)
        self._key = relay_key(state_key)
        self.relay = Relay(self._key, self.id, relay_timeout)
        self._beat: asyncio.Task[None] | None = None
        self._store_down = False  # logged once until the store answers again

    @property
    def session_prefix(self) -> str:
        return session_prefix(self.id)

    async def use_once(self, key: str, ttl: float) -> bool:
        """The sealer's ledger: a requestState is spent once in the whole cluster.  A
        store that does not answer (down, or busy past its pool's timeout) refuses
        the retry with a 503 in the client's revision: the client may send it again."""
        try:
            spent = await self.store.use_once(key, ttl)
        except Exception as exc:
            self._unreachable(exc)
            raise _ledger_unavailable() from None
        self._reachable()
        return spent

    def _unreachable(self, exc: Exception) -> None:
        """Said once, not per request, until the store answers again."""
        if not self._store_down:
            self._store_down = True
            log.warning(
                "cluster store unreachable or busy: retries and requests for other "
                "replicas refused (503)",
                error=str(exc) or type(exc).__name__,
            )

    async def _store_forgot(self) -> bool:
        """Whether the store has lost the registry (restarted empty) within a heartbeat
        TTL: this replica's own registration is gone too, or was so lately.  Then it
        announces itself at once, and an owner not found may well be alive, only not
        announced again yet (every replica does within a third of the TTL)."""
        if self.draining or not self.url:
            return False
        loop = asyncio.get_running_loop()
        if loop.time() - self._forgot_at < self.heartbeat_ttl:
            return True
        try:
            if await self.store.replica(self.id) is not None:
                return False
            await self._announce()  # it notes when the store forgot, and says so
        except Exception as exc:
            self._unreachable(exc)
        return True

    def _reachable(self) -> None:
        if self._store_down:
            self._store_down = False
            log.info("cluster store answers again: retries and relays accepted")

    def results(self, route_key: str) -> RouteResults:
        """Where ``route_key``'s public list results are shared."""
        return RouteResults(self.store, route_key)

    def attach(self, path: str, max_body: int, sealer: StateSealer) -> None:
        """A route whose requests are relayed to their owner."""
        self.routes[path] = RouteEntry(max_body, sealer)

    # ------------------------------------------------------------ membership

    async def start(self, url: str) -> None:
        self.url = url
        await self.verdicts.adopt()
        await self._announce()
        self._beat = asyncio.get_running_loop().create_task(self._heartbeat())
        log.info("joined the cluster", replica=self.id, url=url)

    async def _announce(self) -> None:
        replica = Replica(self.id, self.url, self.draining)
        self._registering = True
        was = await self.store.register(replica, self.heartbeat_ttl)
        if not was and self._announced and not self.draining:
            # Our own key was gone: the store forgot every replica (restarted empty, a
            # failover to a copy that never had it).  For a heartbeat's TTL an owner
            # not found may be alive and not announced again yet: never "gone".
            self._forgot_at = asyncio.get_running_loop().time()
            log.warning("cluster store lost the registry (restarted empty?): announcing again")
        self._announced = True

    async def _heartbeat(self) -> None:
        """Announce every third of the TTL; publish a fresh verdict at once, so a
        replica that (re)joins soon after adopts it instead of probing."""
        while True:
            beat = True
            # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancellation
            # that lands as the event is set, and the heartbeat (and the shutdown that
            # awaits its end) then never stopped.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.heartbeat_ttl / 3):
                    await self.verdicts.fresh.wait()
                beat = False
            if beat:
                try:  # before writing: to the primary
                    await self.store.follow_primary()
                except Exception as exc:  # the sentinels unreachable: the announce still goes
                    log.warning("cluster store primary not checked", error=str(exc))
            try:
                if beat:
                    await self._announce()
                await self.verdicts.publish()
            except Exception as exc:  # the store is down: keep serving what is ours
                log.warning("cluster heartbeat failed", error=str(exc))

    async def drain(self, deadline_s: float, busy: Callable[[], int]) -> None:
        """Take no new work, let what is ours finish (up to ``deadline_s``), leave."""
        self.draining = True
        with contextlib.suppress(Exception):
            await self._announce()
        deadline = time.monotonic() + deadline_s
        log.info("draining cluster member", replica=self.id, busy=busy())
        # Polled: parked calls end when their clients retry, which no event here tells.
        while busy() and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        await self.leave()

    async def leave(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            # Bounded: whatever the heartbeat was in, leaving must not wait for ever.
            await asyncio.wait({self._beat}, timeout=LEAVE_GRACE)
            self._beat = None
        if not self._registering:  # never registered (a start ended early): nothing to undo
            return
        # Bounded too: a store that hangs must not hold a replica's way down.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(LEAVE_GRACE):
                await self.store.deregister(self.id)

    async def close(self) -> None:
        await self.leave()
        await self.relay.close()
        await self.store.close()

    # ------------------------------------------------------------- requests

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        entry = self.routes.get(request.path)
        if entry is None or request.method not in ("GET", "POST", "DELETE"):
            response: web.StreamResponse = await handler(request)
            return response
        if RELAY_HEADER in request.headers:
            body = await _take_body(request, entry.max_body)
            if not verify(self._key, request, body):
                return web.Response(status=403, text="relay not authenticated")
            return await self._here(request, handler)  # relayed once: never again
        owner, body = await self._owner(request, entry)
        target = await self._target(owner)
        if target is not None and not isinstance(target, Failure):
            relayed = await self._relay(request, body, target)
            if isinstance(relayed, web.StreamResponse):
                return relayed
            target = relayed
        if isinstance(target, Failure):
            request[OWNER_UNKNOWN] = target  # the transport words it, in the client's revision
        return await self._here(request, handler)

    async def _relay(
        self, request: web.Request, body: bytes, target: Replica
    ) -> web.StreamResponse | Failure | None:
        """The owner's answer.  An owner that refuses a connection for a moment is not
        dead: while the store still has it registered (its heartbeat is the judge) the
        request is sent again, a few times within RELAY_PATIENCE.  None: answer here,
        as for a gone owner (unregistered meanwhile, or still refusing: a crashed
        owner's registration outlives it by up to a heartbeat TTL)."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + RELAY_PATIENCE
        pause = 0.1
        while True:
            try:
                return await self.relay.forward(request, body, target.url)
            except Unreached as exc:
                if loop.time() + pause > give_up:
                    log.warning("relay refused: owner unreachable, taken for gone", error=str(exc))
                    return None
            await asyncio.sleep(pause)  # a pause before asking again, not a synchronisation
            pause *= 2
            try:
                found = await self.lookups.replica(target.id)
            except Exception as exc:
                self._unreachable(exc)
                return _owner_unknown()
            if found is None:
                return None  # its registration ended: gone
            target = found

    def here(self, path: str, headers: Mapping[str, str], body: bytes) -> bool:
        """Whether a POST (``headers`` by lower-case name) is answered here with nothing
        to verify or relay: what the middleware decides, for the lane."""
        entry = self.routes.get(path)
        if entry is None:
            return True
        if RELAY_HEADER.lower() in headers:
            return False
        owner = (
            session_owner(headers.get("mcp-session-id"))
            or parked_owner(body, entry.sealer)
            or task_owner(body)
        )
        return owner == self.id if owner is not None else not self.draining

    async def _here(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        response: web.StreamResponse = await handler(request)
        return response

    async def _owner(self, request: web.Request, entry: RouteEntry) -> tuple[str | None, bytes]:
        """The replica the request belongs to (None: new work), and its body (read
        here, and put back for the handler)."""
        session_id = request.query.get(SESSION_QUERY) or request.headers.get("Mcp-Session-Id")
        owner = session_owner(session_id)
        body = b""
        if request.method == "POST" and (owner is None or owner != self.id):
            body = await _take_body(request, entry.max_body)
            if owner is None:
                owner = parked_owner(body, entry.sealer) or task_owner(body)
        return owner, body

    async def _target(self, owner: str | None) -> Replica | Failure | None:
        """Where to relay: the live owner; or, while draining, any live replica that is
        not for new work.  None: answer here; a Failure: the owner could not be looked
        up, answer that (it may be alive: not "gone")."""
        if owner == self.id:
            return None
        if owner is not None:
            try:
                found = await self.lookups.replica(owner)
            except Exception as exc:
                self._unreachable(exc)
                return _owner_unknown()
            self._reachable()
            if found is None and await self._store_forgot():
                return _send_again(
                    "the gateway replica that holds this session or call has not announced "
                    "itself to a restarted cluster store yet",
                    after=max(STORE_RETRY_AFTER, math.ceil(self.heartbeat_ttl / 3)),
                )
            return found
        if not self.draining:
            return None
        try:
            others = [r for r in await self.store.replicas() if r.id != self.id and not r.draining]
        except Exception:
            return None
        return random.choice(others) if others else None


def _ledger_unavailable() -> Failure:
    return _send_again(
        "the cluster store did not answer in time, so requestState cannot be checked"
    )


def _owner_unknown() -> Failure:
    return _send_again(
        "the cluster store did not answer in time, so the gateway replica that holds this "
        "session or call cannot be located"
    )


def _send_again(what: str, after: int = STORE_RETRY_AFTER) -> Failure:
    return Failure(
        FailureKind.OVERLOADED,
        f"{what}; send the same request again",
        {"retryAfterSeconds": after},
        headers={"Retry-After": str(after)},
    )


async def _take_body(request: web.Request, limit: int) -> bytes:
    """The body (up to ``limit`` + 1 bytes), put back so the handler reads it again."""
    if request.method != "POST":
        return b""
    buf = bytearray()
    while len(buf) <= limit:
        chunk = await request.content.read(limit + 1 - len(buf))
        if not chunk:
            break
        buf += chunk
    raw = bytes(buf)
    # A limit above the body: feeding it must never pause the connection.
    replay = StreamReader(request.protocol, len(raw) + 2**16, loop=asyncio.get_running_loop())
    if raw:
        replay.feed_data(raw)
    replay.feed_eof()
    # aiohttp has no public way to hand a handler a body already read: swap the payload
    # and forget the cached `content` (tests/cluster covers this against aiohttp's own).
    request._payload = replay
    request._cache.pop("content", None)
    return raw
