"""Sorting the messages of one shared upstream channel out to their requests.

HTTP+SSE (one GET stream) and stdio (one stdout) carry every server message
on a single channel, with nothing but JSON-RPC itself to tie a reply to the
request it answers.  Both carriers use the same rules, kept here:

- a response goes to the request with its id (it ends that request's
  exchange); a response to no request in flight is logged and dropped;
- a progress notification whose token a request in flight sent goes to
  that request;
- a notification naming a listen in flight (by the listen's JSON-RPC id, as
  the ``listen_named`` function the carrier's user passes in reads it: how a
  revision tags a listen's notifications is no carrier's business) goes to
  that listen;
- any other session-level notification (a list changed, a resource updated)
  is about no request: it goes to the unsolicited queue, whence the session's
  listeners get it (attributed to the one call in flight, it reached only that
  call);
- any other message goes to the one call in flight when there is exactly one
  besides the listens (a call's logs while the session's listen is open), or
  to the one request in flight; else to the unsolicited queue.

Queues never make the reader wait: when full, the oldest message is dropped.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from gateway.core.jsonrpc import is_response
from gateway.core.jsonrpc import valid_id as is_id
from gateway.upstream.carriers.base import CarrierError, Message

RequestKey = str | int
# The listen a server message names (that listen request's JSON-RPC id), or None.
ListenNamer = Callable[[Message], Any]
# Notifications about the session, never about one request.
SESSION_NOTIFICATIONS = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    }
)


class WarningLogger(Protocol):
    """A structlog logger: only ``warning`` and ``info`` with one string are used."""

    def warning(self, event: str, *args: Any, **kwargs: Any) -> Any: ...

    def info(self, event: str, *args: Any, **kwargs: Any) -> Any: ...


def no_listen(message: Message) -> None:
    """A ``ListenNamer`` for a channel whose messages never name a listen."""
    return


def progress_token(message: Message) -> Any:
    """The progress token a request asks for (``params._meta.progressToken``), or None."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if is_id(token) else None


class DropOldestQueue:
    """A queue whose producer never waits: when full, the oldest item is dropped.

    A shared-channel reader must never block (it would stall every request),
    and an unread queue must not grow without end.  ``close`` lets the
    consumer drain what is queued, then end (or raise ``error``).
    """

    def __init__(self, maxsize: int, what: str, logger: WarningLogger) -> None:
        self._items: deque[Message] = deque()
        self._maxsize = maxsize
        self._what = what
        self._log = logger
        self._ready = asyncio.Event()
        self._closed = False
        self._error: CarrierError | None = None
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Message) -> None:
        if self._closed:
            return
        if len(self._items) >= self._maxsize:
            self._items.popleft()
            self.dropped += 1
            # Warn on the first drop and then sparingly: a flood must not flood the log too.
            if self.dropped == 1 or self.dropped % 1000 == 0:
                self._log.warning(
                    f"{self._what} is full ({self._maxsize} messages): "
                    f"dropped the oldest ({self.dropped} so far)"
                )
        self._items.append(item)
        self._ready.set()

    def close(self, error: CarrierError | None = None) -> None:
        if not self._closed:
            self._closed = True
            self._error = error
            self._ready.set()

    async def get(self) -> Message | None:
        """The next item; None once closed and drained (or the close error)."""
        while not self._items:
            if self._closed:
                if self._error is not None:
                    raise self._error
                return None
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()


class Listening:
    """One request's queue in a demux, for its reply's ``closer``: closing it stops
    the reading (the caller cancels in-band, with ``notifications/cancelled``, if it
    wants the upstream to stop too: no HTTP response to drop here)."""

    __slots__ = ("_demux", "_key", "_queue")

    def __init__(self, demux: Demux, key: RequestKey, queue: DropOldestQueue) -> None:
        self._demux, self._key, self._queue = demux, key, queue

    async def aclose(self) -> None:
        self._demux.forget(self._key, self._queue)
        self._queue.close()


class Demux:
    """The waiters and the unsolicited queue of one shared channel's lifetime;
    ``listen_named`` reads which listen a message names (default: none does)."""

    def __init__(
        self,
        max_queued: int,
        what: str,
        logger: WarningLogger,
        listen_named: ListenNamer = no_listen,
    ) -> None:
        self.what = what
        self.max_queued = max_queued
        self.log = logger
        self.listen_named = listen_named
        self.waiters: dict[RequestKey, DropOldestQueue] = {}
        self.tokens: dict[Any, RequestKey] = {}
        self._token_of: dict[RequestKey, Any] = {}
        # Requests whose answer is a stream of notifications (a listen).
        self.listens: set[RequestKey] = set()
        self.unsolicited = DropOldestQueue(max_queued, f"{what} unsolicited queue", logger)
        self.closed = False

    def register(
        self, request: Message, *, listen: bool = False
    ) -> tuple[RequestKey, DropOldestQueue]:
        """A queue for ``request``'s messages, registered before the request is sent;
        ``listen``: its answer is a stream of notifications, not a call's."""
        key = request.get("id")
        if not is_id(key):
            raise ValueError("a request needs a string or integer id")
        assert isinstance(key, str | int)
        if self.closed:  # registered before sending: nothing was sent
            raise CarrierError(f"the {self.what} channel is closed", unreached=True)
        if key in self.waiters:
            raise CarrierError(f"a request with id {key!r} is already in flight")
        queue = DropOldestQueue(self.max_queued, f"{self.what} request {key!r}", self.log)
        self.waiters[key] = queue
        if listen:
            self.listens.add(key)
        token = progress_token(request)
        if token is not None and token not in self.tokens:
            self.tokens[token] = key
            self._token_of[key] = token
        return key, queue

    def forget(self, key: RequestKey, queue: DropOldestQueue) -> None:
        if self.waiters.get(key) is queue:
            del self.waiters[key]
        if key not in self.waiters:
            self.listens.discard(key)
            self._drop_token(key)

    def _drop_token(self, key: Any) -> None:
        token = self._token_of.pop(key, None) if is_id(key) else None
        if token is not None and self.tokens.get(token) == key:
            del self.tokens[token]

    def route(self, message: Message) -> None:
        """Put one message where it belongs (the rules in the module docstring)."""
        if not isinstance(message.get("method", ""), str):  # no JSON-RPC message: dropped
            self.log.warning(f"dropping a message ({self.what}) whose method is not a string")
            return
        if is_response(message):
            key = message["id"]
            queue = self._take(key)
            if queue is None:
                self.log.info(
                    f"dropping a response ({self.what}) to no request in flight: id={key!r}"
                )
                return
            queue.put(message)
            queue.close()  # the response ends its exchange
            return
        queue = self._owner(message)
        if queue is not None:
            queue.put(message)
        else:
            self.unsolicited.put(message)

    def _owner(self, message: Message) -> DropOldestQueue | None:
        """The queue of the request in flight a server message is about, if known."""
        listen = self.listen_named(message)
        if is_id(listen) and listen in self.listens:
            return self.waiters.get(listen)
        params = message.get("params")
        if message.get("method") == "notifications/progress":
            token = params.get("progressToken") if isinstance(params, dict) else None
            owner = self.tokens.get(token) if is_id(token) else None
            queue = self.waiters.get(owner) if owner is not None else None
            if queue is not None:
                return queue
        if message.get("method") in SESSION_NOTIFICATIONS:
            return None
        if len(self.waiters) == 1:
            return next(iter(self.waiters.values()))
        calls = [q for k, q in self.waiters.items() if k not in self.listens]
        return calls[0] if len(calls) == 1 else None

    def fail(self, key: Any, error: CarrierError) -> bool:
        """End the request ``key`` with ``error`` (its answer could not be read);
        False when no request with that id is in flight."""
        queue = self._take(key)
        if queue is None:
            return False
        queue.close(error)
        return True

    def _take(self, key: Any) -> DropOldestQueue | None:
        """The queue of request ``key``, no longer waited on (None: none in flight)."""
        queue = self.waiters.pop(key, None) if is_id(key) else None
        if queue is not None:
            self._drop_token(key)
            self.listens.discard(key)
        return queue

    def shutdown(self, error: CarrierError) -> None:
        """Fail every request in flight with ``error``; end the unsolicited queue."""
        if self.closed:
            return
        self.closed = True
        waiters, self.waiters = self.waiters, {}
        self.tokens.clear()
        self._token_of.clear()
        self.listens.clear()
        for queue in waiters.values():
            queue.close(error)
        self.unsolicited.close()
