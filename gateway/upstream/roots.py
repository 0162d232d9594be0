"""Roots belong to the stateless client that gives them, not to the pool it lands in.

A handshake-era server asks ``roots/list`` when it wants a client's roots;
stateless clients share pooled upstream sessions.  Were a pool's roots whatever
some earlier caller answered, a later caller's tools could run in that caller's
directories.  So, per client (``roots=per-client``, the default), a stateless
client that declared ``roots`` is asked only what its server asks:

- a call runs at once on a pool that holds no client's roots, a call that may
  ask alone among such calls on its session (``SessionPool.claim``), so a roots
  question is its own even when the server asks it off the call's stream;
- when the server asks ``roots/list`` inside the call, the call's client is asked
  in the call's own round (like an elicitation); asked outside a call (after
  ``initialized``), the question is held and put to the pool's next call's client
  in that call's round.  Either way the session then holds those roots: it leaves
  the roots-free pool and is kept under a key naming their digest, so it never
  serves a client with other roots, or with none known;
- a server seen asking outside calls keeps roots per session (learned per route,
  or said by ``roots=per-session``): there a call that may ask (``tools/call``,
  ``prompts/get``, ``resources/read``) first asks its client for its roots, one
  round before the call, and runs on the pool of exactly those, whose server is
  answered by the gateway; a call that cannot ask (a listing) runs on a pool that
  answers no roots.  A server that asks only inside calls is never asked first.

``roots=shared`` keeps the old rule: a pool's server asks, the pool's next call's
client answers, and the answer serves the pool.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import orjson
import structlog

from gateway.core import MAY_ASK, Answer, Ask, Asker, AskKind, Call, Exchange

log = structlog.get_logger(__name__)

# What a pool without a client's roots answers: no roots (never another client's).
NO_ROOTS: dict[str, Any] = {"roots": []}
ROOTS_QUESTION = Ask(AskKind.LIST_ROOTS, {})
# The part of a pool key that says its session holds a client's roots.
ROOTED = ":r:"


class RootsUse(StrEnum):
    """What a route knows of its server's use of roots."""

    UNSEEN = "unseen"  # never seen asking: assumed to ask only inside calls, if ever
    IN_CALLS = "in-calls"  # seen asking inside calls only: asked there, never first
    PER_SESSION = "per-session"  # seen asking outside calls: keeps them per session


def roots_digest(roots: dict[str, Any]) -> str:
    """The part of a pool key that names its roots (equal answers, equal pools)."""
    raw = orjson.dumps(roots, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(raw).hexdigest()[:16]


def as_roots(answer: Answer | None) -> dict[str, Any]:
    """A client's answer to ``roots/list`` as the roots a pool holds: a refusal, an
    error or a malformed list holds none."""
    result = answer.result if answer is not None else None
    if not isinstance(result, dict) or not isinstance(result.get("roots"), list):
        return dict(NO_ROOTS)
    return {"roots": result["roots"]}


def answering_roots(roots: dict[str, Any], ask: Asker | None, heard: Callable[[], None]) -> Asker:
    """An asker that answers ``roots/list`` with ``roots`` (and calls ``heard()``),
    and passes every other question on to ``ask``: the server's in-call question
    about roots is the pool's to answer, never its caller's again."""

    async def answer(question: Ask) -> Answer | None:
        if question.kind is AskKind.LIST_ROOTS:
            heard()
            return Answer(result=roots)
        return await ask(question) if ask is not None else None

    return answer


def taking_roots(
    ask: Asker | None,
    asking: Callable[[], None],
    given: Callable[[dict[str, Any] | None], None],
) -> Asker:
    """An asker that puts ``roots/list`` to the call's client (``asking()`` first, so
    the session leaves its roots-free pool before anyone answers) and tells
    ``given(roots)`` what the session's server now holds (None: the question reached
    no client, the call having ended first); other questions pass on."""

    async def answer(question: Ask) -> Answer | None:
        if question.kind is not AskKind.LIST_ROOTS:
            return await ask(question) if ask is not None else None
        asking()
        answered = await ask(question) if ask is not None else None
        given(as_roots(answered) if answered is not None else None)
        return answered

    return answer


class RootsRule:
    """One route's rule for roots (``per-client``, ``per-session`` or ``shared``) and
    what it has learned of its server's use of them."""

    def __init__(self, option: str, route: str = "") -> None:
        self.option = option
        self.route = route
        self.use = RootsUse.PER_SESSION if option == "per-session" else RootsUse.UNSEEN

    @property
    def mode(self) -> str:
        """What /readyz shows: ``shared``, or how a stateless client's roots are had."""
        return "shared" if self.option == "shared" else str(self.use)

    def heard(self, in_call: bool) -> None:
        """The server asked ``roots/list`` (on any session of the route): inside a
        call, or outside one (then it keeps roots per session, for good)."""
        learned = RootsUse.IN_CALLS if in_call else RootsUse.PER_SESSION
        if self.use is RootsUse.PER_SESSION or self.use is learned:
            return
        self.use = learned
        if self.option == "per-client":
            log.info("upstream roots use learned", route=self.route, roots=str(learned))

    def applies(self, exchange: Exchange) -> bool:
        """Whether this exchange's client's roots are its own: a stateless client's that
        declared roots (others are never asked for them), unless roots are shared."""
        return (
            self.option != "shared"
            and exchange.downstream is None
            and isinstance(exchange.call.client.capabilities.get("roots"), dict)
        )

    def per_session(self, exchange: Exchange) -> bool:
        """Whether a pool of this exchange's answers roots itself (no roots, or the
        client's asked first): its server keeps roots per session."""
        return self.applies(exchange) and self.use is RootsUse.PER_SESSION

    def asks_first(self, call: Call, exchange: Exchange) -> bool:
        """Whether this call first asks its client for its roots (one round)."""
        return self.per_session(exchange) and call.operation in MAY_ASK and exchange.ask is not None
