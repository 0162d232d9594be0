"""Questions awaiting an answer: the one holder for what waits on a client.

An upstream asks mid-call (elicitation, sampling, roots) and waits; the gateway
hands the question to a client that answers later, in another request.  Parked
calls, tasks awaiting input and a session client's pushed requests all hold
such questions: each under a key the client answers by (the request id of a
pushed one), with a future its asker awaits, and one event that wakes whoever
gathers them into a round.  Resolving them all at once (a refusal when
the call is released, "nobody asked" when it ended first) is the holder's job,
so no question is ever left waiting.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

Q = TypeVar("Q")
A = TypeVar("A")


class Questions(Generic[Q, A]):
    """Questions by key (``prefix`` and a number), each with the future its asker
    awaits.  ``changed`` is set whenever one is asked (and by the owner, for other
    news, such as the call's end)."""

    # Keys are opaque to clients: the prefix only makes them readable in logs.
    def __init__(self, prefix: str = "q") -> None:  # pragma: no mutate
        self._prefix = prefix
        self._numbers = itertools.count(1)
        self._waiting: dict[str, tuple[Q, asyncio.Future[A]]] = {}
        self.changed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._waiting)

    def ask(self, question: Q) -> tuple[str, asyncio.Future[A]]:
        """Hold ``question``: its key, and the future that gets its answer."""
        key = f"{self._prefix}{next(self._numbers)}"
        future: asyncio.Future[A] = asyncio.get_running_loop().create_future()
        self._waiting[key] = (question, future)
        self.changed.set()
        return key, future

    def forget(self, key: str) -> None:
        """The asker stopped waiting (answered, timed out, or gone)."""
        self._waiting.pop(key, None)

    def unanswered(self) -> dict[str, Q]:
        if not self._waiting:
            return {}  # the common case, without building a comprehension's frame
        return {key: q for key, (q, future) in self._waiting.items() if not future.done()}

    def answer(self, answers: Mapping[str, A]) -> None:
        """Give each named question its answer; unknown or repeated keys are ignored."""
        for key, answer in answers.items():
            self.answer_one(key, answer)

    def answer_one(self, key: str, answer: A) -> bool:
        """Give one question its answer; False when none waits under ``key``."""
        held = self._waiting.pop(key, None)
        if held is None or held[1].done():
            return False
        held[1].set_result(answer)
        return True

    def resolve_all(self, answer_for: Callable[[Q], A]) -> None:
        """Answer every question still waiting (a refusal, or "nobody asked") and let
        go of them all."""
        if not self._waiting:
            return
        for question, future in self._waiting.values():
            if not future.done():
                future.set_result(answer_for(question))
        self._waiting.clear()

    def take_all(self) -> list[tuple[Q, asyncio.Future[A]]]:
        """Hand every question still waiting to whoever answers them now (they stop
        being held here; their askers keep waiting on the same futures)."""
        taken = [(q, future) for q, future in self._waiting.values() if not future.done()]
        self._waiting.clear()
        return taken

    def take(self, which: Callable[[Q], bool]) -> list[tuple[Q, asyncio.Future[A]]]:
        """As :meth:`take_all`, for the questions ``which`` picks only."""
        taken = [(k, q, f) for k, (q, f) in self._waiting.items() if not f.done() and which(q)]
        for key, _, _ in taken:
            del self._waiting[key]
        return [(q, f) for _, q, f in taken]

    def cancel_all(self) -> None:
        """Nobody will answer any more (the client's session ended): every asker
        stops waiting."""
        for _, future in self._waiting.values():
            future.cancel()
        self._waiting.clear()

    async def next_change(self, also: asyncio.Future[Any], within: float | None) -> bool:
        """Wait until a question is asked, ``also`` is done, or ``within`` seconds
        pass; False when the time ran out first."""
        self.changed.clear()
        changed = asyncio.ensure_future(self.changed.wait())
        try:
            done, _ = await asyncio.wait(
                {also, changed}, timeout=within, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            changed.cancel()
        return bool(done)
