"""The link to one upstream server: its era, its sessions, running calls on it.

The link speaks the upstream's native revision through that revision's
adapter (client role).  It probes the era once (:mod:`.probe`), caches the
verdict and probes again when the verdict stops holding.  A handshake-era
upstream gives each client session an upstream session of its own, and
stateless clients capability-true pools (:mod:`.sessions`), never shared
across principals; what arrives outside any call goes to the session it
belongs to (:mod:`.unsolicited`); calls run through :mod:`.calls`; what tools/list
says about each tool is kept in :mod:`.tools`.  Messages move through the
carriers (:mod:`.carriers`), which know no revision.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import aiohttp
import orjson
import structlog

from gateway.core import (
    MAY_ASK,
    Call,
    ClientContext,
    Event,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    Value,
)
from gateway.core.redaction import safe_url
from gateway.protocol import Adapter, AdapterSet
from gateway.upstream import passthrough, retry
from gateway.upstream.calls import Calls, Channel, QuestionBounds, must_notify, quiet
from gateway.upstream.carriers.base import Carrier, CarrierError, carrier_failure, start_carrier
from gateway.upstream.carriers.crashes import Crashes
from gateway.upstream.carriers.legacy_sse import open_legacy_sse_probe
from gateway.upstream.carriers.streamable import StreamableHttpCarrier
from gateway.upstream.open_session import OWN_KEY, UpstreamSession
from gateway.upstream.probe import EraProbe, Verdict
from gateway.upstream.roots import (
    NO_ROOTS,
    ROOTED,
    ROOTS_QUESTION,
    RootsRule,
    as_roots,
    roots_digest,
)
from gateway.upstream.sessions import SHARED_KEY, SessionCallback, SessionPool, stdio_child
from gateway.upstream.settings import UpstreamSettings
from gateway.upstream.tools import ToolBook, ToolFacts
from gateway.upstream.unsolicited import NotificationSink

__all__ = ["UpstreamLink", "UpstreamSettings", "Verdict", "carrier_failure"]

# The key of the one session a shared stdio child holds.
SHARED = SHARED_KEY

log = structlog.get_logger(__name__)

# How many capability sets' pool digests a link remembers (then it starts again).
MAX_DIGESTS = 256
MAX_DIGEST_KEY = 4096


class UpstreamLink:
    """One route's upstream.  Safe for many concurrent calls."""

    def __init__(
        self, settings: UpstreamSettings, adapters: AdapterSet, http: aiohttp.ClientSession
    ) -> None:
        self.settings = settings
        self._http = http
        self._streamable = StreamableHttpCarrier(
            settings.url,
            http,
            connect_timeout=settings.connect_timeout,
            # A call's whole time is bounded by the route's timeout (Calls), paused
            # while the upstream waits on the client: no silence bound of its own.
            read_timeout=None,
            send_timeout=settings.request_timeout,
            redirects=settings.redirect_policy,
            max_connections=settings.max_connections,
            max_message_size=settings.http_max_message,
        )
        # A stdio command's crashes, shared by its children (back-off, last stderr lines).
        self.crashes = Crashes() if settings.transport == "stdio" else None
        # What modern requests and the probe go through.
        self._primary: Carrier = (
            stdio_child(settings, self.crashes) if self.crashes else self._streamable
        )
        self.verdict: Verdict | None = None
        self.stateless = False
        # Calls sent once more after a failure, by why (upstream/retry.py); off for a
        # link that is one target of several (the targets send it to another).
        self.retrying = True
        self.retries: dict[str, int] = {}
        # Told whenever the verdict changes (the backend drops the profile it cached).
        self.verdict_changed: Callable[[], None] | None = None
        # Pool digests by revision and declared capabilities (bounded: clients choose them).
        self._digests: dict[tuple[Adapter, bytes], str] = {}
        # Told of each verdict this replica's own probe reaches (the cluster shares it).
        self.on_verdict: Callable[[Verdict], None] | None = None
        self._probe_lock = asyncio.Lock()
        self._calls = Calls(
            itertools.count(1),
            deadline=settings.request_timeout,
            waits=settings.ask_timeout,
            questions=QuestionBounds(settings.questions_at_once, settings.questions_per_call),
        )
        self._probe = EraProbe(settings, adapters, self._primary, self._calls.ids, self._sse_check)
        self._sessions = SessionPool(
            settings, adapters, http, (self._primary, self._streamable), self._calls
        )
        self._sessions.crashes = self.crashes
        # A tool's declared header parameters, by the newest stateless revision's rules.
        self._tools = ToolBook(next(iter(adapters.stateless), None))
        # Whose roots a stateless pool's server sees (upstream/roots.py).
        self._roots = RootsRule(settings.roots, settings.route)
        self._sessions.unsolicited.roots_heard = self._roots.heard

    def pool_counts(self) -> tuple[int, int]:
        """Keep-alive connections to the upstream: (carrying a request, idle)."""
        return self._streamable.pool_counts()

    def session_count(self) -> int:
        """Open handshake-era upstream sessions (0 for a stateless upstream)."""
        return len(self._sessions)

    @property
    def roots_mode(self) -> str:
        """How a stateless client's roots are had on this route (upstream/roots.py)."""
        return self._roots.mode

    def tool_index_restarts(self) -> int:
        """Times a principal's tool index passed its bound (upstream/tools.py)."""
        return self._tools.budget.restarts

    # ------------------------------------------------------------ the verdict

    async def ensure(self, principal: str, headers: Mapping[str, str]) -> Verdict:
        if self.verdict is not None:
            return self.verdict
        async with self._probe_lock:
            if self.verdict is not None:
                return self.verdict
            handshake = partial(self._first_session, headers)
            try:
                verdict = await self._probe.run(headers, handshake)
            except Failure as failure:
                raise self.refused_own(failure) from None
            self._set_verdict(verdict)
            log.info(
                "upstream era detected",
                route=self.settings.route,
                upstream=safe_url(self.settings.url) if self.settings.url else "stdio",
                revision=verdict.adapter.version,
                transport=verdict.transport,
                stateless=not verdict.adapter.has_handshake,
            )
            if self.on_verdict is not None:
                self.on_verdict(verdict)
            return verdict

    def adopt(self, verdict: Verdict) -> None:
        """A verdict known elsewhere (another replica's probe): no probe here."""
        if self.verdict is None:
            self._set_verdict(verdict)

    def forget(self) -> None:
        """The verdict stopped holding: probe again on the next call."""
        self._set_verdict(None)
        self._tools.reset()

    def _set_verdict(self, verdict: Verdict | None) -> None:
        self.verdict = verdict
        # Whether the upstream is of the stateless era (known once probed): decided
        # here, with the verdict, not asked on every call.
        self.stateless = verdict is not None and not verdict.adapter.has_handshake
        if self.verdict_changed is not None:
            self.verdict_changed()

    async def _first_session(
        self, headers: Mapping[str, str], transport: str, pinned: Adapter | None
    ) -> Verdict:
        """The probe's handshake: a shared stdio child keeps the session it opens; any
        other upstream has it ended, since sessions belong to clients."""
        session = await self._sessions.open(transport, headers, pinned)
        if self._shared:
            self._sessions.adopt(SHARED, session)
        else:
            await self._sessions.drop(SHARED, session)
        return Verdict(session.adapter, transport, session.profile)

    async def _sse_check(self, headers: Mapping[str, str]) -> str | None:
        return await open_legacy_sse_probe(
            self._http, self.settings.url, self.settings.probe_timeout, headers
        )

    # ------------------------------------------------------ change notifications

    def on_notification(self, sink: NotificationSink | None) -> None:
        """Session-level notifications (list changes, resource updates) go to ``sink``,
        with the scope (see :meth:`scope`) of the upstream session they came in."""
        self._sessions.unsolicited.notify = sink

    def on_session(self, callback: SessionCallback | None) -> None:
        """``callback(scope)`` runs whenever a handshake-era upstream session is opened
        (re-opened after it expired, or after a restart, included)."""
        self._sessions.on_session = callback

    def keep_watched(self, watched: Callable[[str], bool]) -> None:
        """``watched(scope)``: someone listens through that pool, so it is not idle."""
        self._sessions.watched = watched

    @property
    def _shared(self) -> bool:
        return self.settings.transport == "stdio" and self.settings.shared

    def scope(self, exchange: Exchange) -> str:
        """Which upstream session (or stateless listen) serves this exchange's client."""
        verdict = self.verdict
        if verdict is None or not verdict.adapter.has_handshake:
            return exchange.principal  # a stateless upstream: one listen per principal
        return self._session_key(exchange, verdict.adapter)

    def _session_key(self, exchange: Exchange, adapter: Adapter) -> str:
        """A client session's own upstream session; for a stateless client, the pool of
        its principal and the capabilities it declared (as the upstream reads them)."""
        if self._shared:
            return SHARED
        if exchange.downstream is not None:
            return "s:" + exchange.downstream.key
        capabilities = exchange.call.client.capabilities
        given = (adapter, orjson.dumps(capabilities, option=orjson.OPT_SORT_KEYS))
        digest = self._digests.get(given)
        if digest is None:
            # Projected as the upstream reads them, then hashed: once per distinct set.
            declared = adapter.client_project_capabilities(dict(capabilities))
            raw = orjson.dumps(declared, option=orjson.OPT_SORT_KEYS)
            digest = hashlib.sha256(raw).hexdigest()[:16]
            if len(given[1]) <= MAX_DIGEST_KEY:  # a client's huge declaration: not kept
                if len(self._digests) >= MAX_DIGESTS:
                    self._digests.clear()
                self._digests[given] = digest
        return f"p:{exchange.principal}:{digest}"

    def _pool_roots(self, exchange: Exchange) -> dict[str, Any] | None:
        """What a stateless client's pool without roots of its own answers its server's
        ``roots/list`` where the server keeps roots per session (no roots); None: the
        question goes to a client (and the session is then keyed by its answer)."""
        return NO_ROOTS if not self._shared and self._roots.per_session(exchange) else None

    def _rooting(self, exchange: Exchange) -> bool:
        """Whether a roots question on this exchange's pool goes to the caller, whose
        answer then names the pool (upstream/roots.py)."""
        return not self._shared and self._roots.applies(exchange)

    async def _rooted(
        self, key: str, call: Call, exchange: Exchange
    ) -> tuple[str, dict[str, Any] | None]:
        """The pool this call runs on, and the roots it holds: for a call that asks
        its client for its roots first (one round), the pool of exactly those."""
        roots = self._pool_roots(exchange)
        if roots is None or not self._roots.asks_first(call, exchange):
            return key, roots
        assert exchange.ask is not None  # asks_first says the client can be asked
        roots = as_roots(await exchange.ask(ROOTS_QUESTION))
        rooted = f"{key}{ROOTED}{roots_digest(roots)}"
        self._sessions.take_over(key, rooted, roots)
        return rooted, roots

    async def attach(self, exchange: Exchange) -> None:
        """Open the exchange's client's upstream session (and its own stream) if it is
        not open yet, so its session-level messages arrive.  Raises on failure."""
        verdict = await self.ensure(exchange.principal, exchange.forward_headers)
        if verdict.adapter.has_handshake:
            key = self._session_key(exchange, verdict.adapter)
            roots = self._pool_roots(exchange)
            await self._sessions.get(key, exchange, verdict.transport, verdict.adapter, roots)

    async def open(self, exchange: Exchange) -> Failure | None:
        """A client session begins: its upstream session is opened now, as the server
        would have seen it directly (its questions then reach the client at once)."""
        try:
            await self.attach(exchange)
        except CarrierError as exc:
            return carrier_failure(exc)
        except Failure as failure:
            return failure
        return None

    async def end(self, exchange: Exchange) -> None:
        """A client session is over: its upstream session ends with it."""
        verdict = self.verdict
        if verdict is not None and verdict.adapter.has_handshake and not self._shared:
            await self._sessions.end(self._session_key(exchange, verdict.adapter))

    async def notify(self, call: Call, exchange: Exchange) -> None:
        """A client's notification (its roots changed, say) for its upstream session."""
        verdict = self.verdict
        if verdict is None or not verdict.adapter.has_handshake:
            return
        if call.operation is Operation.ROOTS_LIST_CHANGED and self._rooting(exchange):
            return  # a stateless client's roots reach its server only in its calls
        session = self._sessions.find(self._session_key(exchange, verdict.adapter))
        if session is not None:
            await self._sessions.notify(session, call, exchange)

    async def listen(self, call: Call, exchange: Exchange) -> AsyncIterator[Event]:
        """A stateless upstream's `subscriptions/listen`: its notifications (the
        acknowledgement first), until the upstream ends it (returns) or the stream is
        lost (raises CarrierError or Failure).  Closing the iterator closes the listen."""
        verdict = await self.ensure(exchange.principal, exchange.forward_headers)
        if verdict.adapter.has_handshake:
            raise Failure(FailureKind.INTERNAL, "a handshake-era upstream has no listen")
        if self._primary.is_session:
            await start_carrier(self._primary)
        channel = Channel(verdict.adapter, self._primary)
        async with contextlib.aclosing(self._calls.listen(channel, call, exchange)) as events:
            async for event in events:
                yield event

    # ------------------------------------------------------------ running calls

    async def handle(self, call: Call, exchange: Exchange) -> Outcome:
        """Run one call upstream, in the upstream's revision; events go to ``exchange``.
        A failed call is sent once more where that cannot harm (upstream/retry.py);
        a link that is one of a route's targets leaves that to the targets."""
        if not self.retrying:
            return await self.send_once(call, exchange)
        safe = self.tool_is_safe(exchange.principal, call)
        return await retry.once_more(call, exchange, safe, self)

    async def ping(self) -> None:
        """An MCP ``ping`` (a stateless upstream: ``server/discover``) in the upstream's
        own revision, on the gateway's own pooled
        session (no client's): what a target's check asks, since a port that takes
        connections says nothing of a server whose MCP has stopped answering.  Raises
        the Failure; the caller bounds the time."""
        verdict = self.verdict
        if verdict is None:
            await self.ensure("anonymous", {})
            return
        client = ClientContext(verdict.adapter.version, info={"name": "gateway-check"})
        # A stateless server has no ping: its discovery is what it always answers.
        operation = Operation.PING if verdict.adapter.has_handshake else Operation.DISCOVER
        call = Call(0, operation, operation.value, {}, client)
        outcome = await self.send_once(call, Exchange(call, self.settings.route, verdict.profile))
        if isinstance(outcome, Failure):
            raise outcome

    async def pass_through(
        self, call: Call, version: str, exchange: Exchange
    ) -> dict[str, Any] | Value | passthrough.Held | passthrough.Park | None:
        """A call of a client of ``version`` sent by the pass-through lane
        (upstream/passthrough.py); None: nothing was sent, the full path's: the
        upstream's era unknown; two handshake-era revisions; headers to mint or check
        for a tool this caller has not listed; a stateless upstream not on Streamable
        HTTP; no open upstream session of the client session's own (``downstream``),
        or a stateless client's pool not open and ready (:meth:`_pooled`); PARK: a
        pool whose server may ask off the call, for an exchange nobody can be asked
        on.  In flight on its session meanwhile, under ``exchange``.  A result for a
        client of another revision comes back read (a Value), to encode."""
        verdict = self.verdict
        if verdict is None or call.operation not in verdict.adapter.verbatim_operations:
            return None
        translate = verdict.adapter.version != version
        if translate and verdict.adapter.has_handshake and exchange.downstream is not None:
            return None  # a handshake-era client of another revision: the full path's
        channel = self._channel(verdict.adapter, call, exchange)
        if exchange.ask is None and isinstance(channel, UpstreamSession) and channel.pooled_asking:
            return passthrough.PARK  # a question off its stream would find nobody to ask
        name = call.params.get("name")
        facts = self._tools.known(exchange.principal, name) if isinstance(name, str) else None
        # Headers to mint, or a client's to check against a tool not listed yet.
        headers = not verdict.adapter.has_handshake or call.param_headers is not None
        if channel is None or not passthrough.tool_plain(call.operation, facts, headers):
            return None
        upstream_id = next(self._calls.ids)
        sending = passthrough.Sending(
            verdict.adapter, channel.carrier, upstream_id, self._calls.deadlines, verdict.profile
        )
        sending.translate = translate
        if must_notify(verdict.adapter, channel.carrier):
            sending.on_cancel = partial(self._calls.cancel_quietly, channel.carrier)
        if self.retrying:  # what the lane asks is seen, as once_more's watch sees it
            sending.watch = retry.watched(
                call, exchange, self.tool_is_safe(exchange.principal, call)
            )
        return await sending.send(call, exchange, channel.session_id, channel.inflight)

    def _channel(self, adapter: Adapter, call: Call, exchange: Exchange) -> Channel | None:
        """Where the lane sends: a stateless upstream's Streamable HTTP carrier, the client
        session's own upstream session or a stateless client's pool, holding no roots."""
        if not adapter.has_handshake:
            return Channel(adapter, self._primary) if self._primary is self._streamable else None
        downstream = exchange.downstream
        if self._shared or (downstream is not None and downstream.ended):
            return None
        if downstream is None:
            session = self._pooled(adapter, call, exchange)
        else:
            session = self._sessions.find("s:" + downstream.key)
        if session is None or session.closed or session.roots is not None:
            return None
        session.last_used = time.monotonic()
        return session

    def _pooled(self, adapter: Adapter, call: Call, exchange: Exchange) -> UpstreamSession | None:
        """A stateless client's pool, if the full path would send its call on it at once:
        open, on Streamable HTTP, no roots of the client's to ask for, no question held
        for its next call, its log level as the call wants it (SessionPool.ready)."""
        if self._rooting(exchange):
            return None
        key = self._session_key(exchange, adapter)
        session = self._sessions.find(key)
        if session is None or session.carrier.is_session or not self._sessions.ready(session, call):
            return None
        self._sessions.touch(key)
        return session

    def tool_is_safe(self, principal: str, call: Call) -> bool:
        """The tool a tools/call names says running it twice does no harm (as the list
        this principal read said)."""
        name = call.params.get("name") if call.operation is Operation.TOOLS_CALL else None
        facts = self._tools.known(principal, name) if isinstance(name, str) else None
        return facts is not None and facts.safe

    def note_retry(self, call: Call, why: str) -> None:
        self.retries[why] = self.retries.get(why, 0) + 1
        # The operation, never the method as the client wrote it (a vendor's is "*").
        method = call.operation.value
        log.info("upstream call sent again", route=self.settings.route, method=method, why=why)

    async def send_once(self, call: Call, exchange: Exchange) -> Outcome:
        try:
            verdict = await self.ensure(exchange.principal, exchange.forward_headers)
        except Failure as failure:
            return self.refused_own(failure)
        if not verdict.adapter.has_handshake:
            outcome = await self._handle_modern(verdict.adapter, call, exchange)
        else:
            outcome = await self._handle_legacy(verdict, call, exchange)
        return self.refused_own(outcome) if isinstance(outcome, Failure) else outcome

    def refused_own(self, failure: Failure) -> Failure:
        """An upstream 401/403 to credentials the route sets itself is the route's
        misconfiguration: a gateway error naming where they come from, never a login
        challenge sent on to the client (whose token is not what was refused)."""
        source = self.settings.credentials_from
        if not source or failure.kind not in (FailureKind.UNAUTHORIZED, FailureKind.FORBIDDEN):
            return failure
        status = 401 if failure.kind is FailureKind.UNAUTHORIZED else 403
        return Failure(
            FailureKind.UPSTREAM_CREDENTIALS,
            f"the upstream refused the Authorization set by {source} (HTTP {status})",
            {"status": status},
        )

    async def _handle_legacy(
        self, verdict: Verdict, call: Call, exchange: Exchange, own: str | None = None
    ) -> Outcome:
        """``call`` on the exchange's session (``own``: on the gateway's own session of
        that key instead, which declares nothing, so holds no roots)."""
        if own is not None:
            return await self._on_session(verdict, call, exchange, own, None)
        pool = self._session_key(exchange, verdict.adapter)
        key, roots = await self._rooted(pool, call, exchange)
        if roots is not None or not self._rooting(exchange) or call.operation not in MAY_ASK:
            return await self._on_session(verdict, call, exchange, key, roots)
        key = self._sessions.claim(pool)  # its roots question can only be its own
        try:
            return await self._on_session(verdict, call, exchange, key, None, pool)
        finally:
            self._sessions.unclaim(key)

    async def _on_session(
        self,
        verdict: Verdict,
        call: Call,
        exchange: Exchange,
        key: str,
        roots: dict[str, Any] | None,
        pool: str | None = None,
    ) -> Outcome:
        """``call`` on ``key``'s session (opened with ``roots`` if need be); ``pool``:
        a roots-free pool's, whose roots question goes to the caller."""
        rooting = pool is not None
        for attempt in range(2):
            try:
                session = await self._session(key, exchange, verdict, roots)
            except CarrierError as exc:
                return carrier_failure(exc)
            except Failure as failure:
                return failure
            if pool is not None and session.scope == key:
                session.scope = pool  # its listeners are the pool's
            try:
                outcome = await self._sessions.handle(call, exchange, session, rooting)
            except CarrierError as exc:
                await self._sessions.drop(key, session)
                expired = exc.status == 404 and session.session_id is not None
                # On a new session, once, only where the call cannot have run: the session
                # was gone upstream (404) or already here (its stream or child ended, so
                # nothing was sent).  A call lost after it was sent may have run: its
                # client is told so, and only retry.py's rule sends it again.  (An HTTP
                # server not reached is not tried again here: the failover is targets'.)
                ended = session.carrier.is_session and exc.unreached
                if attempt == 0 and (expired or ended):
                    continue
                return carrier_failure(exc)
            if call.operation is Operation.TOOLS_LIST and isinstance(outcome, Value):
                tools = self._tools.of(exchange.principal)
                tools.learn(session.adapter, outcome, param_headers=False)
            return outcome
        raise AssertionError("unreachable")

    async def _session(
        self, key: str, exchange: Exchange, verdict: Verdict, roots: dict[str, Any] | None
    ) -> UpstreamSession:
        """``key``'s session; one given a client's roots while it was being found has
        left the key (it is not this caller's), so the key's next one."""
        get = partial(self._sessions.get, key, exchange, verdict.transport, verdict.adapter)
        session = await get(roots)
        return session if session.key == key else await get(roots)

    async def _handle_modern(self, adapter: Adapter, call: Call, exchange: Exchange) -> Outcome:
        try:
            if self._primary.is_session:
                await start_carrier(self._primary)  # a stateless server: restart freely
            extra = await self._param_headers(adapter, call, exchange)
            outcome = await self._calls.handle(
                call, exchange, Channel(adapter, self._primary), extra
            )
        except CarrierError as exc:
            return carrier_failure(exc)
        except Failure as failure:
            return failure
        if call.operation is Operation.TOOLS_LIST and isinstance(outcome, Value):
            outcome = self._learn_modern(adapter, outcome, exchange.principal)
        if isinstance(outcome, Failure) and outcome.kind is FailureKind.UNSUPPORTED_VERSION:
            self.forget()  # the upstream changed revision under us
        return outcome

    # ------------------------------------------------------- what tools say

    def _learn_modern(self, adapter: Adapter, outcome: Value, principal: str) -> Value:
        # Only Streamable HTTP carries Mcp-Param-* headers.
        headers = self._primary is self._streamable
        return self._tools.of(principal).learn(adapter, outcome, param_headers=headers)

    async def task_support(self, call: Call, exchange: Exchange) -> str | None:
        """The called tool's `execution.taskSupport` (its tool list is read once
        when the tool was never listed)."""
        facts = await self._lookup(call, exchange)
        return facts.task_support if facts is not None else None

    async def declared_headers(
        self, call: Call, exchange: Exchange
    ) -> dict[tuple[str, ...], str] | None:
        """The header parameters of the tool ``call`` names, as the upstream lists it to
        the caller's principal (None: the tool is not known).  A list this principal
        never read is read once, quietly: a stateless upstream's as the caller's own
        request; a handshake-era upstream's on a session of the gateway's own
        (:meth:`_own_read`), since on the caller's session the read would go first and
        hear questions meant for the client's call (server-filesystem's `roots/list`
        on `initialized`)."""
        name = call.params.get("name")  # a tools/call's: the tool
        if not isinstance(name, str):
            return None
        verdict = self.verdict
        if verdict is None:
            try:
                verdict = await self.ensure(exchange.principal, exchange.forward_headers)
            except (Failure, CarrierError):
                return None  # the call itself meets the same failure
        if not verdict.adapter.has_handshake:
            facts = await self._lookup(call, exchange)
        else:
            index = self._tools.of(exchange.principal)
            reads = index.unread(name)
            facts = await index.lookup(call, partial(self._own_read, exchange=exchange))
            if reads and not self._shared:
                # Read once: its session is not kept (it would idle beside the
                # principal's pool until it expired, an upstream session for nothing).
                self._calls.spawn(self._end_own(OWN_KEY + exchange.principal))
        return facts.declared if facts is not None else None

    async def _end_own(self, key: str) -> None:
        await self._sessions.end(key)

    async def _own_read(self, listing: Call, exchange: Exchange) -> Outcome:
        """One page of a handshake-era upstream's list, read on the principal's session
        of the gateway's own: opened with the caller's credentials (lists may differ
        by caller) but declaring no capability, so the server has nothing to ask there."""
        verdict = self.verdict
        if verdict is None:
            return Failure(FailureKind.INTERNAL, "the upstream's era is not known")
        client = replace(listing.client, capabilities={}, info=None, log_level=None)
        own = replace(quiet(exchange), call=replace(listing, client=client), downstream=None)
        key = SHARED if self._shared else OWN_KEY + exchange.principal
        return await self._handle_legacy(verdict, own.call, own, key)

    async def _lookup(self, call: Call, exchange: Exchange) -> ToolFacts | None:
        """The facts of the called tool, the caller's list read quietly if need be."""
        index = self._tools.of(exchange.principal)

        async def read(listing: Call) -> Outcome:  # only for a tool never listed
            return await self.handle(listing, quiet(exchange))

        return await index.lookup(call, read)

    async def _param_headers(
        self, adapter: Adapter, call: Call, exchange: Exchange
    ) -> dict[str, str]:
        if call.operation is not Operation.TOOLS_CALL or self._primary is not self._streamable:
            return {}

        async def list_page(listing: Call) -> Outcome:
            channel = Channel(adapter, self._primary)
            outcome = await self._calls.handle(listing, quiet(exchange), channel)
            if not isinstance(outcome, Value):
                return outcome
            return self._learn_modern(adapter, outcome, exchange.principal)

        facts = await self._tools.of(exchange.principal).lookup(call, list_page)
        arguments = call.params.get("arguments")
        if facts is None or not facts.param_paths or not isinstance(arguments, dict):
            return {}
        return adapter.client_param_headers(facts.param_paths, arguments)

    async def close(self) -> None:
        """End every upstream session (DELETE) and close every carrier."""
        await self._sessions.close()
        self._calls.close()
        await self._streamable.close()
        if self._primary is not self._streamable:
            await self._primary.close()
