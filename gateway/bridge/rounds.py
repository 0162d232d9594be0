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
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from enum import IntEnum
from functools import partial

from gateway.bridge.principal import ANONYMOUS
from gateway.core import Answer, Ask, EventSink, Outcome, discard_event
from gateway.core.pending import Questions


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
    # The unguessable name its sealed state carries.
    id: str = field(default_factory=partial(secrets.token_urlsafe, 16))

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
