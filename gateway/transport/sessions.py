"""Downstream sessions: what the gateway remembers about a handshake-era client.

Only handshake-era clients have sessions; the stateless revision never gets
one.  The store is a small interface so several replicas could share a real
store later; this one lives in memory.  It is bounded per principal and in
all, with fair shares (:class:`~gateway.core.limits.FairTable`): a caller at its
own bound is refused; when the store is full, the least recently used idle
session of whoever holds the most (more than the newcomer) is ended to make
room.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from gateway.core import (
    Answer,
    Ask,
    Downstream,
    Failure,
    RequestId,
    SessionView,
    discard_event,
)
from gateway.core.limits import FairTable
from gateway.core.pending import Questions
from gateway.transport.outbox import Outbox

log = structlog.get_logger(__name__)

# Server-to-client messages queued for a session's stream while nobody reads it.
MAX_QUEUED = 1024


@dataclass(eq=False)
class Session:
    view: SessionView
    principal: str
    last_seen: float = field(default_factory=time.monotonic)
    # Requests pushed to the client (by request id), waiting for its answer.
    # Made when first asked: most sessions never are (its asyncio.Event is a deque).
    _questions: Questions[Ask, Answer] | None = field(default=None, init=False, repr=False)
    # Messages for the client's standalone stream (GET, or the HTTP+SSE stream): made
    # when first needed (most sessions never get a message outside their calls).
    _outbox: Outbox[dict[str, Any] | None] | None = field(default=None, init=False, repr=False)
    # The client's calls in flight, by its request id: what notifications/cancelled names.
    running: dict[RequestId, asyncio.Task[Any]] = field(default_factory=dict)
    stream_open: bool = False
    closed: bool = False
    # Called once when the session ends (e.g. to release its subscriptions).
    on_close: list[Callable[[], None]] = field(default_factory=list)
    # The session as the upstream side sees it (its own upstream session's client).
    downstream: Downstream | None = None

    @property
    def id(self) -> str:
        return self.view.id

    @property
    def questions(self) -> Questions[Ask, Answer]:
        """Requests pushed to the client (by request id), waiting for its answer."""
        if self._questions is None:
            self._questions = Questions("gw-")
        return self._questions

    @property
    def outbox(self) -> Outbox[dict[str, Any] | None]:
        """Messages for the standalone stream; ``None`` (queued once it closed) ends it."""
        if self._outbox is None:
            self._outbox = Outbox(MAX_QUEUED)
            if self.closed:
                self._outbox.put_nowait(None)
        return self._outbox

    @property
    def idle(self) -> bool:
        """Nothing in progress: no stream read, no call running, no question asked."""
        return not (self.stream_open or self.running or self._questions or self.closed)

    def deliver(self, message: dict[str, Any]) -> bool:
        """Queue a message for the standalone stream; False when full or closed."""
        if self.closed:
            return False
        try:
            self.outbox.put_nowait(message)
        except asyncio.QueueFull:
            return False
        return True

    def resolve(self, request_id: RequestId, answer: Answer) -> bool:
        """The client answered a pushed request: False when nobody waits for it."""
        questions = self._questions
        if questions is None or not isinstance(request_id, str):
            return False  # (nothing was ever asked)
        return questions.answer_one(request_id, answer)

    def on_end(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` once when the session ends (at once if it has ended: a request
        still arriving when its session was deleted must not leave state behind)."""
        if self.closed:
            hook()
        else:
            self.on_close.append(hook)

    def close(self) -> None:
        downstream = self.downstream
        if downstream is not None and not downstream.ended:
            downstream.ended = True
            # Its ask and notify are closures over this session: an ended copy without
            # them stays here (the key and flags read after the end), so the session is
            # freed by reference counting once its last user lets go, not at a full
            # collection (which an idle gateway does not run).
            self.downstream = replace(downstream, ask=None, notify=discard_event)
        if not self.closed:
            for hook in self.on_close:
                hook()
            self.on_close.clear()
        self.closed = True
        if self._questions is not None:
            self._questions.cancel_all()
        if self._outbox is not None:  # (one made later starts with its end in it)
            with contextlib.suppress(asyncio.QueueFull):
                self._outbox.put_nowait(None)  # wakes a stream reader so it can end


# Seconds a session may stay idle; sessions in all, and per principal.
DEFAULT_IDLE_TIMEOUT = 3600.0
DEFAULT_MAX_SESSIONS = 10_000
DEFAULT_MAX_SESSIONS_PER_PRINCIPAL = 1_000


class SessionStore:
    """In-memory sessions with idle expiry, bounded per principal and in all."""

    def __init__(
        self,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        per_principal: int = DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
        id_prefix: str = "",
        route: str = "",
    ) -> None:
        self.route = route
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        # In a cluster, ids start with the owner replica's id (so any replica can relay).
        self.id_prefix = id_prefix
        self._sessions: dict[str, Session] = {}
        self.shares: FairTable[str] = FairTable(
            "sessions",
            max_sessions,
            per_principal,
            idle=lambda sid: self._sessions[sid].idle,
            end=self._make_room,
        )

    def room_for(self, principal: str) -> Failure | None:
        """Why ``principal`` may not open another session now (None: it may; another
        caller's idle session may have been ended for it, see the module's rule)."""
        refused = self.shares.make_room(principal)
        if refused is not None and self.sweep():
            refused = self.shares.make_room(principal)
        return refused

    def _make_room(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            log.warning(
                "ended an idle session to make room for another caller",
                route=self.route,
                principal=session.principal,
                sessions=len(self._sessions),
            )
        self.delete(session_id)

    def __len__(self) -> int:
        return len(self._sessions)

    def create(
        self,
        protocol_version: str,
        principal: str,
        capabilities: dict[str, Any] | None = None,
        info: dict[str, Any] | None = None,
        adapter: object = None,
    ) -> Session:
        """A new session.  Callers ask :meth:`room_for` first; what this one counts
        can go past a bound only by the handshakes already under way."""
        # 32 random bytes, URL-safe: visible ASCII as the spec requires, unguessable.
        session_id = self.id_prefix + secrets.token_urlsafe(32)
        view = SessionView(session_id, protocol_version, dict(capabilities or {}), info)
        view.adapter = adapter
        session = Session(view, principal)
        self._sessions[session_id] = session
        self.shares.add(principal, session_id)
        return session

    def get(self, session_id: str | None, principal: str) -> Session | None:
        """The session with this id, if ``principal`` is the one that created it.

        A session id is never a credential: presented by anyone else it is
        answered exactly as an unknown session, with no hint that it exists."""
        if session_id is None:
            return None
        session = self._sessions.get(session_id)
        if session is None or not hmac.compare_digest(session.principal, principal):
            return None
        now = time.monotonic()
        if now - session.last_seen > self.idle_timeout:
            self.delete(session_id)
            return None
        session.last_seen = now
        self.shares.touch(session_id)
        return session

    def delete(self, session_id: str) -> bool:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        self.shares.remove(session_id)
        session.close()
        return True

    def sweep(self) -> int:
        now = time.monotonic()
        expired = [
            sid
            for sid, s in self._sessions.items()
            if now - s.last_seen > self.idle_timeout and not s.stream_open
        ]
        for sid in expired:
            self.delete(sid)
        return len(expired)

    def by_revision(self) -> dict[str, int]:
        """Open sessions by the revision their clients negotiated (the console's)."""
        counts: dict[str, int] = {}
        for session in self._sessions.values():
            version = session.view.protocol_version
            counts[version] = counts.get(version, 0) + 1
        return counts

    def close_all(self) -> None:
        for sid in list(self._sessions):
            self.delete(sid)
