"""Parked calls: upstream calls waiting for a stateless client's answers.

A legacy upstream asks mid-call and waits on its open request; a stateless
client can only be answered and retried.  So the upstream call keeps running
in a task, its pending asks wait on futures here, and the client's retry finds
them again through the sealed state.  The table is bounded and every entry has
a deadline: on expiry the asks are answered with a refusal and the upstream
call is cancelled, so nothing leaks and nothing hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import structlog

from gateway.core import Answer, Ask, EventSink, Outcome, discard_event

log = structlog.get_logger(__name__)


@dataclass(eq=False)
class ParkedCall:
    id: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    task: asyncio.Task[Outcome] | None = None
    # key -> (ask, future the upstream's request waits on)
    pending: dict[str, tuple[Ask, asyncio.Future[Answer]]] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    round: int = 0
    emit: EventSink = discard_event
    missing: Ask | None = None
    _keys: Any = field(default_factory=lambda: itertools.count(1))
    _expiry: asyncio.TimerHandle | None = None

    def add_ask(self, ask: Ask) -> asyncio.Future[Answer]:
        key = f"q{next(self._keys)}"
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self.pending[key] = (ask, future)
        self.changed.set()
        return future

    def unanswered(self) -> dict[str, Ask]:
        return {key: ask for key, (ask, future) in self.pending.items() if not future.done()}

    def answer(self, answers: dict[str, Answer]) -> None:
        for key, (_, future) in list(self.pending.items()):
            if key in answers and not future.done():
                future.set_result(answers[key])
                del self.pending[key]

    def refuse_all(self) -> None:
        for ask, future in self.pending.values():
            if not future.done():
                future.set_result(Answer.refusal(ask.kind))
        self.pending.clear()


class ParkingTable:
    """Bounded, deadline-driven storage of parked calls."""

    def __init__(self, max_entries: int = 1_000, ttl: float = 600.0, grace: float = 2.0) -> None:
        self.max_entries = max_entries
        self.ttl = ttl
        self.grace = grace
        self._calls: OrderedDict[str, ParkedCall] = OrderedDict()
        self._reaping: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._calls)

    def get(self, call_id: str) -> ParkedCall | None:
        return self._calls.get(call_id)

    def park(self, parked: ParkedCall) -> None:
        """Keep (or keep again) a call, with a fresh deadline."""
        self._calls[parked.id] = parked
        self._calls.move_to_end(parked.id)
        if parked._expiry is not None:
            parked._expiry.cancel()
        loop = asyncio.get_running_loop()
        parked._expiry = loop.call_later(self.ttl, self.expire, parked.id)
        while len(self._calls) > self.max_entries:
            oldest = next(iter(self._calls))
            log.warning("parking table full: releasing the oldest parked call", id=oldest)
            self.expire(oldest)

    def unpark(self, parked: ParkedCall) -> None:
        if self._calls.get(parked.id) is parked:
            del self._calls[parked.id]
        if parked._expiry is not None:
            parked._expiry.cancel()
            parked._expiry = None

    def expire(self, call_id: str) -> None:
        """Answer the upstream's asks with a refusal, then cancel its call."""
        parked = self._calls.pop(call_id, None)
        if parked is None:
            return
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
