"""Change notifications across eras: who listens to what, and the upstream side of it.

Revision-free.  Listeners are downstream parties that want the upstream's
change notifications (``notifications/*/list_changed``,
``notifications/resources/updated``):

- a handshake-era downstream session (it hears list changes on its standalone
  stream and the updates of the URIs it subscribed to with
  ``resources/subscribe``);
- a stateless client's ``subscriptions/listen`` (it hears what its filter asked
  for and the gateway honoured, on the listen's own stream).

Toward the upstream there is one scope per upstream session (or, for a
stateless upstream, per principal):

- a handshake-era upstream is told ``resources/subscribe`` once per URI and
  scope however many listeners watch it, and ``resources/unsubscribe`` when
  the last one leaves; its session-level notifications come back through
  ``dispatch``;
- a stateless upstream gets one ``subscriptions/listen`` per scope whose filter
  is the union of what the scope's listeners want; it is re-opened when that
  union changes, after the stream is lost, and closed when nobody is left.

Delivery goes through each listener's sink, which the transport built: it
encodes for the listener's revision (tagging a listen's id) and writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import structlog

from gateway.bridge.scopes import Scopes
from gateway.core import (
    Call,
    ClientContext,
    Downstream,
    Event,
    EventSink,
    Exchange,
    Failure,
    FailureKind,
    Interest,
    Operation,
    Outcome,
    ServerProfile,
    Value,
    discard_event,
)
from gateway.core.keylocks import KeyedLocks
from gateway.protocol import Adapter, AdapterSet, adapter_of
from gateway.protocol.adapter import LIST_CHANGES

log = structlog.get_logger(__name__)

UPDATED = "notifications/resources/updated"
LIST_METHODS = frozenset(LIST_CHANGES.values())
# Session-level notifications of the upstream the hub routes.
ROUTED = LIST_METHODS | {UPDATED}
# Bounds: URIs one listen may name, time to wait for an upstream acknowledgement,
# consecutive failed (re)opens of an upstream listen before giving up on it.
MAX_URIS = 1000
# What one downstream session may hold with resources/subscribe: URIs, and the
# length of one (the upstream sees and the hub keeps each).
MAX_SUBSCRIPTIONS = MAX_URIS
MAX_URI_LENGTH = 8192
ACK_TIMEOUT = 10.0
MAX_REOPEN_FAILURES = 8

NotificationSink = Callable[[str, Event], Awaitable[None]]


class _Verdict(Protocol):
    @property
    def adapter(self) -> Adapter: ...


@runtime_checkable
class SubscriptionUpstream(Protocol):
    """What the hub needs of an upstream link."""

    @property
    def stateless(self) -> bool: ...

    @property
    def verdict(self) -> _Verdict | None: ...

    async def handle(self, call: Call, exchange: Exchange) -> Outcome: ...

    def scope(self, exchange: Exchange) -> str: ...

    async def attach(self, exchange: Exchange) -> None: ...

    def listen(self, call: Call, exchange: Exchange) -> AsyncIterator[Event]: ...

    def on_notification(self, sink: NotificationSink | None) -> None: ...


@dataclass(eq=False)
class Listener:
    """One downstream party: a legacy session, or a stateless client's listen."""

    key: str
    scope: str
    sink: EventSink
    lists: frozenset[str] = frozenset()  # list_changed methods it hears
    uris: set[str] = field(default_factory=set)
    ready: bool = True  # a listen hears nothing before its acknowledgement

    def wants(self, event: Event) -> bool:
        if not self.ready:
            return False
        if event.method == UPDATED:
            return event.params.get("uri") in self.uris
        return event.method in self.lists


@dataclass(eq=False)
class _Feed:
    """A stateless upstream's `subscriptions/listen`, shared by one scope."""

    scope: str
    exchange: Exchange  # whose credentials and client context open it
    filter: Interest = field(default_factory=Interest)
    task: asyncio.Task[None] | None = None
    acknowledged: asyncio.Event = field(default_factory=asyncio.Event)
    honoured: Interest | None = None


class SubscriptionHub:
    """One route's change-notification routing.  Safe for concurrent use."""

    def __init__(
        self,
        upstream: SubscriptionUpstream,
        *,
        adapters: AdapterSet | None = None,
        ack_timeout: float = ACK_TIMEOUT,
    ) -> None:
        self.upstream = upstream
        self.adapters = adapters or AdapterSet.default()
        self.ack_timeout = ack_timeout
        self._listeners: dict[str, Listener] = {}
        self._scopes = Scopes()  # the listeners by scope, and what each scope wants
        # Handshake-era upstreams: (scope, uri) -> listeners watching it upstream.
        self._counts: dict[tuple[str, str], int] = {}
        self._locks: KeyedLocks[tuple[str, str]] = KeyedLocks()
        # What a scope's upstream-side requests are made with (credentials, client).
        self._exchanges: dict[str, Exchange] = {}
        self._feeds: dict[str, _Feed] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._listens = itertools.count(1)
        self._closed = asyncio.Event()
        # The upstream's capabilities, and the adapter that reads them.
        self._capabilities: dict[str, Any] = {}
        self._reader: Adapter = self.adapters.adapters[0]
        upstream.on_notification(self.dispatch)
        on_session = getattr(upstream, "on_session", None)
        if on_session is not None:
            on_session(self.resubscribe)
        keep_watched = getattr(upstream, "keep_watched", None)
        if keep_watched is not None:
            keep_watched(self.watched)

    # ------------------------------------------------------------ listeners

    def __contains__(self, key: str) -> bool:
        return key in self._listeners

    def listener(self, key: str) -> Listener | None:
        return self._listeners.get(key)

    def _learn(self, profile: ServerProfile, client: ClientContext) -> None:
        """The upstream's capabilities, read by its adapter (the client's until the
        upstream's revision is known)."""
        self._capabilities = dict(profile.capabilities)
        verdict = self.upstream.verdict
        reader = verdict.adapter if verdict is not None else None
        self._reader = reader or adapter_of(client) or self._reader

    def _list_methods(self) -> frozenset[str]:
        return self._reader.client_list_changes(self._capabilities)

    def join(
        self,
        key: str,
        principal: str,
        sink: EventSink,
        profile: ServerProfile,
        *,
        client: ClientContext,
        headers: Mapping[str, str] | None = None,
        route: str = "",
        lists: bool = True,
        downstream: Downstream | None = None,
    ) -> Listener:
        """A handshake-era downstream session: it hears every list change the upstream
        announces (``lists``: while its stream is open) and the URIs it subscribes to."""
        previous = self._listeners.get(key)
        self._learn(profile, client)
        call = Call(None, Operation.LISTEN, Operation.LISTEN.value, {}, client)
        exchange = Exchange(
            call=call,
            route=route,
            profile=profile,
            principal=principal,
            forward_headers=dict(headers or {}),
            downstream=downstream,
        )
        scope = self.upstream.scope(exchange)
        listener = Listener(key, scope, sink)
        if previous is not None:
            listener.uris = previous.uris  # a re-initialize keeps its subscriptions
            self._scopes.remove(previous.scope, key, previous.lists, previous.uris)
        self._listeners[key] = listener
        self._scopes.add(scope, key, listener.lists, listener.uris)
        self._exchanges.setdefault(scope, exchange)
        self.want_lists(key, lists)
        return listener

    def want_lists(self, key: str, on: bool) -> None:
        """A session's stream opened (or closed): list changes reach it (or not)."""
        listener = self._listeners.get(key)
        if listener is None:
            return
        lists = self._list_methods() if on else frozenset()
        self._scopes.lists(listener.scope, listener.lists, lists)
        listener.lists = lists
        if on and not self.upstream.stateless:
            self._background(self._attach(listener.scope))
        else:
            self._background(self._refresh(listener.scope))

    def leave(self, key: str, *, upstream_gone: bool = False) -> None:
        """A listener is gone (session ended, listen closed): release what it held.
        With ``upstream_gone`` its upstream session ends with it (a client session's
        own): what it held is forgotten, not unsubscribed one by one."""
        listener = self._listeners.pop(key, None)
        if listener is None:
            return
        self._scopes.remove(listener.scope, key, listener.lists, listener.uris)
        alone = not self._scopes.occupied(listener.scope)
        if upstream_gone and alone and not self.upstream.stateless:
            for uri in listener.uris:
                self._counts.pop((listener.scope, uri), None)
            self._forget(listener.scope)
        else:
            self._background(self._release(listener, set(listener.uris)))

    def _forget(self, scope: str) -> None:
        """Nobody listens in ``scope`` any more: drop what the hub kept for it."""
        if not self._scopes.occupied(scope):
            self._exchanges.pop(scope, None)

    async def _attach(self, scope: str) -> None:
        """Make sure the handshake-era upstream session (and its stream) exists."""
        exchange = self._exchanges.get(scope)
        if exchange is None:
            return
        try:
            await self.upstream.attach(exchange)
        except Exception as exc:  # the next call retries; nothing to tell anyone now
            log.info("could not open the upstream session for notifications", error=str(exc))

    # ------------------------------------------------ resources/(un)subscribe

    async def subscribe(self, key: str, call: Call, exchange: Exchange) -> Outcome:
        """A legacy session's `resources/subscribe`, shared upstream."""
        listener = self._listeners.get(key)
        uri = call.params.get("uri")
        if listener is None or not isinstance(uri, str):
            return await self.upstream.handle(call, exchange)
        if uri in listener.uris:
            return Value({})
        refused = _over_bounds(listener, uri)
        if refused is not None:
            return refused
        self._exchanges.setdefault(listener.scope, exchange)
        if self.upstream.stateless:
            self._watch(listener, uri)
            failure = await self._refresh(listener.scope, wait=True)
            if failure is not None:
                self._unwatch(listener, uri)
                self._background(self._refresh(listener.scope))
                return failure
            return Value({})
        outcome = await self._hold(listener.scope, uri, exchange, call)
        if not isinstance(outcome, Failure):
            self._watch(listener, uri)
        return outcome

    def _watch(self, listener: Listener, uri: str) -> None:
        if uri not in listener.uris and self._listeners.get(listener.key) is listener:
            self._scopes.uri(listener.scope, uri, +1)
        listener.uris.add(uri)

    def _unwatch(self, listener: Listener, uri: str) -> None:
        if uri in listener.uris and self._listeners.get(listener.key) is listener:
            self._scopes.uri(listener.scope, uri, -1)
        listener.uris.discard(uri)

    async def unsubscribe(self, key: str, call: Call, exchange: Exchange) -> Outcome:
        listener = self._listeners.get(key)
        uri = call.params.get("uri")
        if listener is None or not isinstance(uri, str):
            return await self.upstream.handle(call, exchange)
        if uri not in listener.uris:
            return Value({})
        self._unwatch(listener, uri)
        if self.upstream.stateless:
            await self._refresh(listener.scope)
        else:
            await self._drop(listener.scope, uri, exchange)
        return Value({})

    async def _hold(
        self, scope: str, uri: str, exchange: Exchange, call: Call | None = None
    ) -> Outcome:
        """Count one more watcher of ``uri``; the first one subscribes upstream."""
        slot = (scope, uri)
        async with self._locks.hold(slot):
            if self._counts.get(slot, 0) == 0:
                request = self._request(Operation.RESOURCES_SUBSCRIBE, uri, exchange, call)
                # The client's own request keeps its exchange: what the upstream says
                # while it runs (a log acknowledging it, say) is the client's.
                own = request is call
                outcome = await self.upstream.handle(
                    request, exchange if own else _quiet(exchange, request)
                )
                if isinstance(outcome, Failure):
                    return outcome
            self._counts[slot] = self._counts.get(slot, 0) + 1
        return Value({})

    async def _drop(self, scope: str, uri: str, exchange: Exchange | None = None) -> None:
        """Count one watcher less; the last one unsubscribes upstream."""
        slot = (scope, uri)
        async with self._locks.hold(slot):
            count = self._counts.get(slot, 0) - 1
            if count > 0:
                self._counts[slot] = count
                return
            self._counts.pop(slot, None)
            exchange = exchange or self._exchanges.get(scope)
            if exchange is None or count < 0:
                return
            request = self._request(Operation.RESOURCES_UNSUBSCRIBE, uri, exchange)
            outcome = await self.upstream.handle(request, _quiet(exchange, request))
            if isinstance(outcome, Failure):
                log.info("upstream unsubscribe failed", uri=uri, error=outcome.message)

    def _request(
        self, operation: Operation, uri: str, exchange: Exchange, call: Call | None = None
    ) -> Call:
        if call is not None and call.operation is operation:
            return call
        return Call(0, operation, operation.value, {"uri": uri}, exchange.call.client)

    async def _release(self, listener: Listener, uris: set[str]) -> None:
        if self.upstream.stateless:
            await self._refresh(listener.scope)
        else:
            for uri in uris:
                await self._drop(listener.scope, uri)
        if not any(self._counts.get((listener.scope, uri)) for uri in uris):
            self._forget(listener.scope)

    async def resubscribe(self, scope: str) -> None:
        """A new upstream session for ``scope``: subscribe again to what is watched."""
        exchange = self._exchanges.get(scope)
        if exchange is None:
            return
        for (held_scope, uri), count in list(self._counts.items()):
            if held_scope != scope or count <= 0:
                continue
            request = self._request(Operation.RESOURCES_SUBSCRIBE, uri, exchange)
            outcome = await self.upstream.handle(request, _quiet(exchange, request))
            if isinstance(outcome, Failure):
                log.info("re-subscribing upstream failed", uri=uri, error=outcome.message)

    def watched(self, scope: str) -> bool:
        """Whether someone listens in ``scope`` (its upstream session is not idle)."""
        return scope in self._exchanges

    # ------------------------------------------------- subscriptions/listen

    async def listen(self, call: Call, exchange: Exchange) -> Outcome:
        """A stateless client's listen on a handshake-era upstream: subscribe what can
        be, acknowledge the honoured subset, relay until the client closes it."""
        client = adapter_of(call.client)
        if client is None:
            return Failure(FailureKind.UNKNOWN_METHOD, f"{call.method} is not bridged here")
        try:
            wanted = client.listen_interest(call.params)
        except Failure as failure:
            return failure
        capabilities = exchange.profile.capabilities
        self._learn(exchange.profile, call.client)
        scope = self.upstream.scope(exchange)
        self._exchanges.setdefault(scope, exchange)
        lists = wanted.lists & self._list_methods()
        listener = Listener(
            f"listen-{next(self._listens)}", scope, exchange.emit, frozenset(lists), ready=False
        )
        self._listeners[listener.key] = listener
        self._scopes.add(scope, listener.key, listener.lists, ())
        try:
            kept: list[str] | None = None
            if wanted.uris is not None and self._reader.client_can_subscribe(capabilities):
                kept = []
                for uri in wanted.uris[:MAX_URIS]:
                    if not isinstance(uri, str) or uri in listener.uris:
                        continue
                    outcome = await self._hold(scope, uri, exchange)
                    if isinstance(outcome, Failure):
                        log.info("upstream refused a subscription", uri=uri, error=outcome.message)
                        continue
                    self._watch(listener, uri)
                    kept.append(uri)
            honoured = Interest(frozenset(lists), None if kept is None else tuple(kept))
            if lists and not listener.uris:
                await self._attach(scope)
            await exchange.emit(client.listen_acknowledgement(honoured))
            listener.ready = True
            await self._closed.wait()
            return Value({})
        finally:
            self.leave(listener.key)

    # ------------------------------------------------------------- delivery

    async def dispatch(self, scope: str, event: Event) -> None:
        """An upstream notification for ``scope``: to every listener that wants it."""
        if event.method not in ROUTED:
            return
        for key in self._scopes.keys(scope):
            listener = self._listeners.get(key)
            if listener is None or not listener.wants(event):
                continue
            try:
                await listener.sink(event)
            except Exception as exc:  # one vanished listener must not starve the others
                log.info("could not deliver a notification", method=event.method, error=str(exc))

    # ------------------------------------------- stateless upstream: the feed

    def _union(self, scope: str) -> Interest:
        lists, uris = self._scopes.wanted(scope)
        wanted = lists & self._list_methods()
        return Interest(wanted, tuple(uris[:MAX_URIS]) if uris else None)

    async def _refresh(self, scope: str, wait: bool = False) -> Failure | None:
        """Bring the scope's upstream listen in line with what its listeners want."""
        if not self.upstream.stateless:
            return None
        wanted = self._union(scope)
        feed = self._feeds.get(scope)
        if feed is not None and feed.filter == wanted and feed.task and not feed.task.done():
            return await self._acknowledged(feed) if wait else None
        if feed is not None and feed.task is not None:
            feed.task.cancel()
        if wanted.empty:
            self._feeds.pop(scope, None)
            return None
        exchange = self._exchanges.get(scope)
        if exchange is None:
            return Failure(FailureKind.INTERNAL, "no credentials to listen upstream with")
        feed = _Feed(scope, exchange, wanted)
        self._feeds[scope] = feed
        feed.task = asyncio.get_running_loop().create_task(self._run_feed(feed))
        return await self._acknowledged(feed) if wait else None

    async def _acknowledged(self, feed: _Feed) -> Failure | None:
        try:
            async with asyncio.timeout(self.ack_timeout):
                await feed.acknowledged.wait()
        except TimeoutError:
            return Failure(
                FailureKind.UPSTREAM_TIMEOUT, "the upstream did not acknowledge the subscription"
            )
        if feed.honoured is None:
            return Failure(FailureKind.UPSTREAM_UNAVAILABLE, "the upstream refused to listen")
        return None

    async def _run_feed(self, feed: _Feed) -> None:
        """Hold the upstream listen open: relay, and re-open after a loss (bounded)."""
        verdict = self.upstream.verdict
        speaks = verdict.adapter if verdict is not None else self._reader
        params = speaks.client_listen_params(feed.filter)
        call = Call(0, Operation.LISTEN, Operation.LISTEN.value, params, feed.exchange.call.client)
        exchange = replace(feed.exchange, call=call)
        failures = 0
        while not self._closed.is_set():
            acknowledged = False
            try:
                async for event in self.upstream.listen(call, exchange):
                    honoured = speaks.client_read_acknowledgement(event)
                    if honoured is not None:
                        feed.honoured = honoured
                        acknowledged = True
                        failures = 0
                        feed.acknowledged.set()
                        continue
                    await self.dispatch(feed.scope, event)
            except asyncio.CancelledError:
                raise
            except Failure as failure:
                log.info("upstream listen failed", error=failure.message)
            except Exception as exc:
                log.info("upstream listen lost", error=str(exc))
            if not acknowledged:
                failures += 1
                feed.acknowledged.set()  # whoever waits for this attempt hears it failed
            if failures >= MAX_REOPEN_FAILURES:
                log.warning("giving up on the upstream listen", scope=feed.scope)
                return
            # Back off before re-opening (a pause, not a synchronisation).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(0.1 * 2**failures, 10.0)):
                    await self._closed.wait()

    # ------------------------------------------------------------------ misc

    def _background(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """End every listen gracefully and stop every upstream listen."""
        self._closed.set()
        for feed in self._feeds.values():
            if feed.task is not None:
                feed.task.cancel()
        self._feeds.clear()
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=2.0)
            for task in pending:
                task.cancel()
        self.upstream.on_notification(None)


def _over_bounds(listener: Listener, uri: str) -> Failure | None:
    """Why one more subscription of this session is refused (None: it is not)."""
    if len(uri) > MAX_URI_LENGTH:
        return Failure(
            FailureKind.QUOTA_EXCEEDED,
            f"a subscribed URI is at most {MAX_URI_LENGTH} characters",
            {"quota": "subscribed URI length", "limit": MAX_URI_LENGTH},
        )
    if len(listener.uris) >= MAX_SUBSCRIPTIONS:
        return Failure(
            FailureKind.QUOTA_EXCEEDED,
            f"too many resource subscriptions for this session (at most {MAX_SUBSCRIPTIONS})",
            {"quota": "resource subscriptions", "limit": MAX_SUBSCRIPTIONS},
        )
    return None


def _quiet(exchange: Exchange, call: Call) -> Exchange:
    """The gateway's own upstream request: nothing of it reaches a client."""
    return replace(exchange, call=call, emit=discard_event, ask=None)
