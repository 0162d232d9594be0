"""A route's upstream as the inbound side sees it: the forwarder that runs its calls,
what the upstream offers, which revision it speaks and whether it is there.

The transport reaches the upstream only through this (the app builds it from an
upstream link); it never imports the upstream package itself.
"""

from __future__ import annotations

import asyncio
import math
import os
import shlex
import time
from typing import Any
from urllib.parse import urlsplit

from gateway.bridge.forwarder import DEFAULT_ASK_SETTLE, DEFAULT_PARK_TTL, Forwarder
from gateway.bridge.rounds import ParkingTable
from gateway.bridge.state import StateSealer
from gateway.core import Call, Exchange, ServerProfile, Value
from gateway.protocol import AdapterSet
from gateway.upstream.carriers.crashes import Crashes
from gateway.upstream.link import UpstreamLink, Verdict
from gateway.upstream.passthrough import HELD, PARK, Held, Park
from gateway.upstream.reach import connectable, spawnable
from gateway.upstream.targets import Targets

# Parked calls in all and per principal; once a principal is at its quota, how long
# its parked calls live (seconds).
__all__ = ["HELD", "PARK", "Backend", "Held", "Park"]

DEFAULT_MAX_PARKED = 1000
DEFAULT_MAX_PARKED_PER_PRINCIPAL = 100
DEFAULT_PARK_TTL_OVER_QUOTA = 30.0


class Backend:
    """The forwarder of one route and the upstream link behind it (``targets``: the
    route's several upstreams, ``link`` the first of them)."""

    def __init__(
        self,
        link: UpstreamLink,
        adapters: AdapterSet,
        *,
        targets: Targets | None = None,
        cache_ttl_ms: int = 0,
        cache_scope: str = "private",
        sealer: StateSealer | None = None,
        max_parked: int = DEFAULT_MAX_PARKED,
        max_parked_per_principal: int = DEFAULT_MAX_PARKED_PER_PRINCIPAL,
        park_ttl_over_quota: float = DEFAULT_PARK_TTL_OVER_QUOTA,
        ask_settle: float = DEFAULT_ASK_SETTLE,
    ) -> None:
        self.link = link
        self.targets = targets
        # What the forwarder calls and the figures are read from: the targets as one.
        self.upstream: UpstreamLink | Targets = targets or link
        self.cache_ttl_ms = cache_ttl_ms
        self.cache_scope = cache_scope
        sealer = sealer or StateSealer(ttl=DEFAULT_PARK_TTL)
        self.forwarder = Forwarder(
            self.upstream,
            adapters=adapters,
            sealer=sealer,
            park_ttl=sealer.ttl,
            parking=ParkingTable(
                max_entries=max_parked,
                ttl=sealer.ttl,
                per_principal=max_parked_per_principal,
                short_ttl=park_ttl_over_quota,
                route=link.settings.route,
            ),
            ask_settle=ask_settle,
            questions=(link.settings.questions_at_once, link.settings.questions_per_call),
        )
        # The profile of the upstream's current verdict, once asked (None: ask
        # ``profile``); the link drops it when its verdict changes.
        self.known: ServerProfile | None = None
        self._known_for: Verdict | None = None
        for each in targets.links if targets is not None else [link]:
            each.verdict_changed = self._forget_profile

    def _forget_profile(self) -> None:
        self.known = self._known_for = None

    async def profile(self, principal: str, headers: dict[str, str]) -> ServerProfile:
        """What the upstream offers, with the route's caching hints (raises Failure).

        Cached for as long as the upstream's verdict holds: a re-probe (the
        upstream changed) gives a fresh profile.
        """
        verdict = await self.upstream.ensure(principal, headers)
        if self.known is not None and verdict is self._known_for:
            return self.known  # cleared whenever a verdict changes: still this one's
        profile = verdict.profile.model_copy(
            update={"cache_ttl_ms": self.cache_ttl_ms, "cache_scope": self.cache_scope}
        )
        self.known, self._known_for = profile, verdict
        return profile

    async def pass_through(
        self, call: Call, version: str, exchange: Exchange
    ) -> dict[str, Any] | Value | Held | Park | None:
        """The pass-through lane's send (gateway/upstream/passthrough.py): the call's
        plain result (as written, or read for a client of another revision: a Value),
        its reply held for the full path, PARK (to be sent from a parked call's task),
        or None (not sent: a route
        of several targets, whose choice and retries are the full path's, or a call
        the link will not pass)."""
        if self.targets is not None:
            return None
        return await self.link.pass_through(call, version, exchange)

    @property
    def upstream_revision(self) -> str | None:
        """The revision the upstream was found to speak (None until known)."""
        verdict = self.link.verdict
        return verdict.adapter.version if verdict is not None else None

    @property
    def hidden(self) -> list[str]:
        """What no client may read in an error: the upstream's URL, host and command
        (longest first, so a part never leaves the rest of a whole showing)."""
        words: list[str] = []
        for link in self.targets.links if self.targets is not None else [self.link]:
            settings = link.settings
            words += [settings.url, *(settings.command or [])]
            if settings.command:
                words += [shlex.join(settings.command), os.path.basename(settings.command[0])]
            if settings.url:
                parts = urlsplit(settings.url)
                words += [parts.netloc, parts.hostname or ""]
        return sorted({w for w in words if len(w) >= 4}, key=len, reverse=True)

    @property
    def upstream_transport(self) -> str | None:
        verdict = self.link.verdict
        return verdict.transport if verdict is not None else None

    @property
    def found_at(self) -> float | None:
        """When the upstream's era was found (wall clock; None until it is)."""
        verdict = self.link.verdict
        return verdict.found_at if verdict is not None else None

    def upstream_connections(self) -> tuple[int, int]:
        """Pooled connections to the upstream: (carrying a request, idle)."""
        return self.upstream.pool_counts()

    def upstream_sessions(self) -> int:
        return self.upstream.session_count()

    def tool_index_restarts(self) -> int:
        return self.upstream.tool_index_restarts()

    def upstream_retries(self) -> dict[str, int]:
        """Calls sent once more after a failure, by why (gateway/upstream/retry.py)."""
        return dict(self.upstream.retries)

    async def ready(self, within: float) -> dict[str, Any]:
        """Ready: the upstream's era is known and its port still takes connections (a
        stdio upstream: its command can still be spawned).  With several targets:
        while one of them is usable, each target's state said."""
        if self.targets is not None:
            return await self._targets_ready(self.targets)
        link = self.link
        crash_loop = _crash_loop(link.crashes)
        if crash_loop is not None:  # said from its children, not by starting another
            return crash_loop
        try:
            if link.verdict is None:
                await asyncio.wait_for(link.ensure("anonymous", {}), within)
            elif link.settings.command is not None:
                spawnable(link.settings.command, link.settings.cwd, link.settings.env)
            else:
                await asyncio.wait_for(connectable(link.settings.url), within)
        except Exception as exc:  # any reason the upstream is not usable
            return {"ready": False, "error": str(exc) or type(exc).__name__}
        verdict = link.verdict
        if verdict is None:
            return {"ready": False, "error": "the upstream's protocol era is not known"}
        ready: dict[str, Any] = {
            "ready": True,
            "upstream_revision": verdict.adapter.version,
            "transport": verdict.transport,
        }
        if verdict.adapter.has_handshake:  # how a stateless client's roots are had
            ready["roots"] = link.roots_mode
        return ready

    async def _targets_ready(self, targets: Targets) -> dict[str, Any]:
        await targets.check_all()
        states = targets.states()
        verdict = targets.verdict
        if verdict is None or all(row["state"] == "ejected" for row in states):
            return {"ready": False, "error": targets.down().message, "targets": states}
        return {
            "ready": True,
            "upstream_revision": verdict.adapter.version,
            "transport": verdict.transport,
            "targets": states,
        }

    async def close(self) -> None:
        """End the bridge's own work (parked calls, tasks, subscriptions)."""
        await self.forwarder.close()


def _crash_loop(crashes: Crashes | None) -> dict[str, Any] | None:
    """/readyz's answer for a command that keeps exiting: how often, its back-off,
    and the last lines it wrote to stderr (None: it does not)."""
    if crashes is None or not crashes.looping:
        return None
    return {
        "ready": False,
        "error": f"its command keeps exiting ({crashes.failures} times in a row)",
        # Rounded up: 0 means a start may go ahead now.
        "next_start_in_s": math.ceil(crashes.delay(time.monotonic()) * 10) / 10,
        "last_stderr": crashes.last_said(),
    }
