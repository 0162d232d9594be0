"""Roots belong to the stateless client that asks, not to the pool it lands in.

A handshake-era server asks ``roots/list`` once per session and keeps the
answer; stateless clients share pooled upstream sessions.  Were a
pool's roots whatever its first caller answered, a later caller's tools would
run in that first caller's directories.  So, per client (the default,
``roots=per-client``), on a route whose server uses roots:

- a stateless client's call that may ask (``tools/call``, ``prompts/get``,
  ``resources/read``) first asks its client for its roots (one
  ``input_required`` round), and runs on the pool of exactly those roots (the
  pool key carries a digest of the answer): clients with the same roots share
  a session, clients with different roots never do;
- the server's ``roots/list`` on such a pool is answered by the gateway with
  the pool's roots, in a call or outside one: no client is asked again;
- a pool without a roots answer (listings, which cannot carry a round) answers
  with no roots at all: never with anyone's.

Whether the server uses roots is learned: any ``roots/list`` it sends says yes;
a rooted session that lived ``ROOTS_QUIET`` seconds and ran a call without one
says no (until it asks again).  Until either, calls take the rooted path, so
no call runs on a session holding another client's roots while the gateway
finds out.  ``roots=shared`` keeps the old rule: a pool's server asks, the
pool's next call's client answers, and the answer serves the pool.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import orjson

from gateway.core import MAY_ASK, Answer, Ask, Asker, AskKind, Call, Exchange

# A rooted session this old (seconds) that ran a call without being asked for roots
# says its server does not use them (server-everything asks 0.35 s after initialize).
ROOTS_QUIET = 2.0
# What a pool without a client's roots answers: no roots (never another client's).
NO_ROOTS: dict[str, Any] = {"roots": []}
ROOTS_QUESTION = Ask(AskKind.LIST_ROOTS, {})


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


def answering_roots(roots: dict[str, Any], ask: Asker | None, heard: Any) -> Asker:
    """An asker that answers ``roots/list`` with ``roots`` (and calls ``heard()``),
    and passes every other question on to ``ask``: the server's in-call question
    about roots is the pool's to answer, never its caller's again."""

    async def answer(question: Ask) -> Answer | None:
        if question.kind is AskKind.LIST_ROOTS:
            heard()
            return Answer(result=roots)
        return await ask(question) if ask is not None else None

    return answer


class RootsRule:
    """One route's rule for roots: per client (the default) or shared, and what it
    has learned about whether its server uses them (None: not known yet)."""

    def __init__(self, per_client: bool) -> None:
        self.per_client = per_client
        self.used: bool | None = None

    def heard(self) -> None:
        """The server asked ``roots/list`` (on any session of the route)."""
        self.used = True

    def applies(self, exchange: Exchange) -> bool:
        """Whether this exchange's pool answers roots itself: a stateless client's,
        in per-client mode, that declared roots (others are never asked for them)."""
        return (
            self.per_client
            and exchange.downstream is None
            and isinstance(exchange.call.client.capabilities.get("roots"), dict)
        )

    def asks_first(self, call: Call, exchange: Exchange) -> bool:
        """Whether this call first asks its client for its roots (one round)."""
        return (
            self.applies(exchange)
            and call.operation in MAY_ASK
            and exchange.ask is not None
            and self.used is not False
        )

    def ran(self, opened_at: float, asked: bool) -> None:
        """A rooted session ran a call: long enough unasked, its server uses no roots."""
        if self.used is None and not asked and time.monotonic() - opened_at >= ROOTS_QUIET:
            self.used = False
