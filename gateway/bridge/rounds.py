"""A parked call's state machine: everything that moves a parked call lives here.

A handshake-era upstream asks mid-call and waits on its open request; a client
that can only be answered and retried (a stateless one) gets ``input_required``
instead.  So the upstream call runs on in a task, and the client's requests
meet it round by round.  Its phases, and the only moves between them:

    RUNNING ──asks──▶ GATHERING ──round handed out──▶ PARKED ──retry──▶ RUNNING
       │                  │                              │
       ├──result──▶ DONE ◀┤                              └──expired──▶ RELEASED
       ├──an ask the client cannot take──▶ MISSING ◀─────┤
       └──client gone──▶ RELEASED ◀──────────────────────┘
    (GATHERING ends as RUNNING would when the result or such an ask comes first)

DONE, MISSING and RELEASED are final.  A retry is taken only in PARKED, and
moving to RUNNING is the first thing it does, with no wait in between: a second
retry of the same round finds the call RUNNING and is refused.

Parked calls wait for a client's retry in the route's :class:`ParkingTable`, which
the retry finds again through the sealed state.  The table is bounded and every
entry has a deadline: on expiry the asks are answered with a refusal and the
upstream call is cancelled, so nothing leaks and nothing hangs.

Bounded per principal and in all, and nobody pays for another's calls: a
principal at its quota has its own oldest parked call released to make room,
and all of its parked calls live only ``short_ttl`` from then on (abandoned
calls go soon); a full table makes room from whoever holds the most
(:class:`~gateway.core.limits.FairTable`), and refuses only when nobody can give way.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import IntEnum

import structlog

from gateway.bridge.principal import ANONYMOUS
from gateway.core import Answer, Ask, EventSink, Outcome, discard_event
from gateway.core.limits import FairTable
from gateway.core.pending import Questions

log = structlog.get_logger(__name__)


class Phase(IntEnum):
    # An IntEnum: its members hash as ints (in C), and every move looks one up.
    RUNNING = 1  # the upstream works; a client request waits for it, or none
    GATHERING = 2  # it asked: a moment for the rest of the round's questions
    PARKED = 3  # input_required handed out: waiting for the client's retry
    DONE = 4  # the upstream answered, and the answer went to a client request
    MISSING = 5  # it asked what the client cannot answer: refused and released
    RELEASED = 6  # expired, or the client left: questions refused, call ended


TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    Phase.RUNNING: frozenset({Phase.GATHERING, Phase.DONE, Phase.MISSING, Phase.RELEASED}),
    Phase.GATHERING: frozenset({Phase.PARKED, Phase.DONE, Phase.MISSING, Phase.RELEASED}),
    Phase.PARKED: frozenset({Phase.RUNNING, Phase.RELEASED}),
    Phase.DONE: frozenset(),
    Phase.MISSING: frozenset(),
    Phase.RELEASED: frozenset(),
}


class IllegalMove(RuntimeError):
    """A move the table does not allow: a bug, never the client's doing."""


@dataclass(eq=False)
class ParkedCall:
    # Whose call it is: its quota of parked calls is the one it counts against.
    principal: str = ANONYMOUS
    task: asyncio.Task[Outcome] | None = None
    # What the upstream asked, by key; a None answer: never put to the client.
    questions: Questions[Ask, Answer | None] = field(default_factory=Questions)
    phase: Phase = Phase.RUNNING
    round: int = 0
    emit: EventSink = discard_event
    missing: Ask | None = None
    _expiry: asyncio.TimerHandle | None = None
    # The unguessable name its sealed state carries: drawn once it is first needed
    # (most calls end without a round, and the draw is a system call).
    _name: str | None = None

    @property
    def id(self) -> str:
        if self._name is None:
            self._name = secrets.token_urlsafe(16)
        return self._name

    @property
    def named(self) -> bool:
        """Whether it ever had a name (only a named call was ever kept in a table)."""
        return self._name is not None

    def move(self, to: Phase) -> None:
        if to is not self.phase and to not in TRANSITIONS[self.phase]:
            raise IllegalMove(f"a parked call cannot go from {self.phase.name} to {to.name}")
        self.phase = to

    @property
    def over(self) -> bool:
        """In a final phase: nothing can resume it."""
        return not TRANSITIONS[self.phase]

    @property
    def changed(self) -> asyncio.Event:
        """Set when the upstream asks, and when its call ends."""
        return self.questions.changed

    def unasked(self) -> None:
        """The call ended with questions its client was never put: they resolve to
        None (nobody asked), so whoever sent them can find them another way."""
        self.questions.resolve_all(lambda _ask: None)

    def refuse_all(self) -> None:
        self.questions.resolve_all(lambda ask: Answer.refusal(ask.kind))


class ParkingTable:
    """Bounded, deadline-driven storage of parked calls, with fair shares
    (:class:`~gateway.core.limits.FairTable`)."""

    def __init__(
        self,
        max_entries: int = 1_000,
        ttl: float = 600.0,
        grace: float = 2.0,
        *,
        per_principal: int = 100,
        short_ttl: float = 30.0,
        route: str = "",
    ) -> None:
        self.route = route
        self.max_entries = max_entries
        self.ttl = ttl
        self.grace = grace
        self.per_principal = per_principal
        self.short_ttl = min(short_ttl, ttl)
        self._calls: OrderedDict[str, ParkedCall] = OrderedDict()
        # Who holds which parked calls: when the table is full, the heaviest holder's
        # oldest call not being resumed gives way to a caller holding fewer.
        self.shares: FairTable[str] = FairTable(
            "calls waiting for input",
            max_entries,
            per_principal,
            idle=lambda call_id: self._calls[call_id].phase is Phase.PARKED,
            end=self._give_way,
        )
        # Principals at their quota, whose calls were all given ``short_ttl``.
        self._hurried: set[str] = set()
        self._reaping: set[asyncio.Task[None]] = set()

    def held(self, principal: str) -> int:
        return self.shares.held(principal)

    def __len__(self) -> int:
        return len(self._calls)

    def get(self, call_id: str) -> ParkedCall | None:
        return self._calls.get(call_id)

    def park(self, parked: ParkedCall) -> None:
        """Keep (or keep again) a call, with a fresh deadline.  Raises a Failure (the
        call released) when the table is full of calls that may not give way."""
        principal, key = parked.principal, parked.id
        if key not in self._calls:
            while self.shares.held(principal) >= self.per_principal:
                # The caller's own oldest goes, never anybody else's.
                self.expire(str(self.shares.oldest(principal)))
            refused = self.shares.make_room(principal)
            if refused is not None:
                self.release(parked)
                log.warning(
                    "parking table full: refusing a call",
                    route=self.route,
                    principal=principal,
                    limit=self.max_entries,
                )
                raise refused
            self.shares.add(principal, key)
        else:
            self.shares.touch(key)
        self._calls[key] = parked
        self._calls.move_to_end(key)
        at_quota = self.shares.held(principal) >= self.per_principal
        # Its own deadline first: _shorten then finds it set (one timer per park).
        self._deadline(parked, self.short_ttl if at_quota else self.ttl)
        if at_quota and principal not in self._hurried:
            self._hurried.add(principal)
            self._shorten(principal)  # at its quota: what it abandons goes soon

    def _give_way(self, call_id: str) -> None:
        parked = self._calls.get(call_id)
        if parked is not None:
            log.warning(
                "released a parked call to make room for another caller",
                route=self.route,
                principal=parked.principal,
                parked=len(self._calls),
            )
        self.expire(call_id)

    def _deadline(self, parked: ParkedCall, ttl: float) -> None:
        if parked._expiry is not None:
            parked._expiry.cancel()
        loop = asyncio.get_running_loop()
        parked._expiry = loop.call_later(ttl, self.expire, parked.id)

    def _shorten(self, principal: str) -> None:
        """Every call of a principal at its quota expires within ``short_ttl``."""
        latest = asyncio.get_running_loop().time() + self.short_ttl
        for call_id in self.shares.keys_of(principal):
            other = self._calls[call_id]
            if other._expiry is None or other._expiry.when() > latest:
                self._deadline(other, self.short_ttl)

    def _forget(self, parked: ParkedCall) -> None:
        self.shares.remove(parked.id)
        if self.shares.held(parked.principal) < self.per_principal - 1:
            self._hurried.discard(parked.principal)  # well under its quota again

    def unpark(self, parked: ParkedCall) -> None:
        if not parked.named or self._calls.get(parked.id) is not parked:
            return  # never parked, or already let go: nothing to forget, no deadline set
        del self._calls[parked.id]
        self._forget(parked)
        if parked._expiry is not None:
            parked._expiry.cancel()
            parked._expiry = None

    def expire(self, call_id: str) -> None:
        """Answer the upstream's asks with a refusal, then cancel its call."""
        parked = self._calls.pop(call_id, None)
        if parked is None:
            return
        self._forget(parked)
        if not parked.over:
            parked.move(Phase.RELEASED)
        if parked._expiry is not None:
            # Released early (table full, or closing): its deadline must not linger
            # in the loop for the rest of the TTL.
            parked._expiry.cancel()
            parked._expiry = None
        parked.refuse_all()
        self._start_reaping(parked)

    def release(self, parked: ParkedCall) -> None:
        """Let go of a call no client will resume (parked or not): its asks are refused
        and its upstream call ended, after ``grace`` so the refusals reach it first."""
        self.unpark(parked)
        if not parked.over:
            parked.move(Phase.RELEASED)
        parked.refuse_all()
        self._start_reaping(parked)

    def _start_reaping(self, parked: ParkedCall) -> None:
        task = asyncio.get_running_loop().create_task(self._reap(parked))
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)

    async def _reap(self, parked: ParkedCall) -> None:
        if parked.task is None:
            return
        # Give the refusal a moment to reach the upstream, then stop the call.
        with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(parked.task), self.grace)
        if not parked.task.done():
            parked.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await parked.task

    async def close(self) -> None:
        for call_id in list(self._calls):
            self.expire(call_id)
        if self._reaping:
            await asyncio.gather(*self._reaping, return_exceptions=True)
