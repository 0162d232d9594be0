"""One open handshake-era upstream session: the one value every room that works
with it shares (the pool that opens and ends it, the calls that run on it, what
arrives outside any call), defined here so none of them owns another's fields."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.core import Downstream, ServerProfile
from gateway.core.pending import Questions
from gateway.upstream.calls import Channel, InFlight

# The key prefix of a session the gateway opens for itself (one per principal): it
# reads what the gateway must know (a tool list) without going on a client's session.
OWN_KEY = "g:"


@dataclass(kw_only=True)
class UpstreamSession(Channel):
    """One open handshake-era upstream session (the channel its calls run on)."""

    profile: ServerProfile
    owns_carrier: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    inflight: InFlight = field(default_factory=InFlight)
    # The level last set upstream with logging/setLevel (None: the server's default).
    log_level: str | None = None
    closed: bool = False
    listener: asyncio.Task[None] | None = None
    # Its server offers no stream of its own (405 to a GET): it sends nothing off a
    # call's stream, so asks no question a call's client cannot be handed there.
    streamless: bool = False
    # Whose it is: the pool key, and the client session it mirrors (None: a pool).
    key: str | None = None
    # The key it was opened under (its listeners' scope), kept when given a
    # client's roots moves it to a key naming them.
    scope: str | None = None
    downstream: Downstream | None = None
    principal: str = ""
    last_used: float = field(default_factory=time.monotonic)
    # The roots this session's server holds, a stateless client's (see
    # upstream/roots.py): the gateway answers it with them; None: its client is asked.
    roots: dict[str, Any] | None = None
    # A pool's questions asked outside any call (the upstream's requests), held for
    # its next call; an answer of None: answered and sent upstream.
    held: Questions[dict[str, Any], dict[str, Any] | None] = field(
        default_factory=lambda: Questions("held")
    )

    @property
    def pooled_asking(self) -> bool:
        """A stateless client's pool whose server may ask off a call's stream."""
        return self.downstream is None and not self.streamless

    @property
    def gateways_own(self) -> bool:
        """Opened by the gateway for itself: no client will ever be asked on it."""
        return self.key is not None and self.key.startswith(OWN_KEY)
