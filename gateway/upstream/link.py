"""The link to one upstream server: its era, its sessions, running calls on it.

The link speaks the upstream's native revision through that revision's
adapter (client role).  It probes the era once, as the spec's dual-era client
rules say (a modern request first, then `initialize` on Streamable HTTP, then
the HTTP+SSE transport), caches the verdict and probes again when the verdict
stops holding.  Legacy upstreams get one real session per principal, never
shared across principals.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import structlog

from gateway import __version__
from gateway.core import (
    Answer,
    AskKind,
    Call,
    Event,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    ServerProfile,
    Value,
)
from gateway.core import jsonrpc as rpc
from gateway.protocol import Adapter, AdapterSet
from gateway.protocol.models import LOG_LEVELS
from gateway.upstream.carrier import Carrier, CarrierError
from gateway.upstream.carrier import Exchange as CarrierExchange
from gateway.upstream.http import LegacySseCarrier, StreamableHttpCarrier, open_legacy_sse_probe
from gateway.upstream.stdio import StdioCarrier

log = structlog.get_logger(__name__)

# Error codes only a modern (stateless-era) server sends: seeing one while
# probing means the server is modern even though it refused the request.
MODERN_PROBE_CODES = frozenset({-32020, -32021, -32022})
# How often a handshake-era session's own stream is opened again after it drops.
LISTEN_RETRIES = 5
GATEWAY_INFO = {"name": "mcp-revision-gateway", "version": __version__}
# Session-level notifications of a legacy upstream that belong to no call: handed to
# the notification sink (the bridge routes them to the downstream listeners).
SESSION_NOTIFICATIONS = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    }
)
NotificationSink = Callable[[str, Event], Awaitable[None]]
# What the gateway declares to a legacy upstream: everything it can relay.
GATEWAY_CAPABILITIES: dict[str, Any] = {
    "roots": {"listChanged": True},
    "sampling": {},
    "elicitation": {"form": {}, "url": {}},
}


@dataclass
class UpstreamSettings:
    url: str
    transport: str = "auto"  # auto | http (Streamable HTTP) | sse (HTTP+SSE) | stdio
    # stdio: the command to spawn, its extra environment and working directory.
    command: list[str] | None = None
    env: dict[str, str] | None = None
    cwd: str | None = None
    # stdio: a child (so an upstream session) per caller instead of one per route.
    per_principal: bool = False
    route: str = ""
    version: str | None = None  # pin the upstream's revision instead of probing
    connect_timeout: float = 10.0
    request_timeout: float = 300.0
    probe_timeout: float = 10.0
    client_info: dict[str, Any] = field(default_factory=lambda: dict(GATEWAY_INFO))
    client_capabilities: dict[str, Any] = field(default_factory=lambda: dict(GATEWAY_CAPABILITIES))


@dataclass
class Verdict:
    """What the probe found: the revision and transport the upstream speaks."""

    adapter: Adapter
    transport: str  # "http" or "sse"
    profile: ServerProfile


@dataclass
class LegacySession:
    adapter: Adapter
    carrier: Carrier
    session_id: str | None
    profile: ServerProfile
    owns_carrier: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    # Calls in flight on this session, by upstream request id: who a message that
    # arrives outside any call's own stream may belong to.
    inflight: dict[int, tuple[Exchange, str | int | None]] = field(default_factory=dict)
    # Calls blocked on an ask of their own: their handler cannot be asking anything else.
    waiting: set[int] = field(default_factory=set)
    # The level last set upstream with logging/setLevel (None: the server's default).
    log_level: str | None = None
    closed: bool = False
    listener: asyncio.Task[None] | None = None


# An upstream that refuses the caller's credentials: the client must hear a 401/403.
_REFUSED = {401: FailureKind.UNAUTHORIZED, 403: FailureKind.FORBIDDEN}


def carrier_failure(exc: CarrierError) -> Failure:
    refused = _REFUSED.get(exc.status or 0)
    if refused is not None:
        headers = {"WWW-Authenticate": exc.challenge} if exc.challenge else {}
        return Failure(refused, f"the upstream answered HTTP {exc.status}", headers=headers)
    if exc.timeout:
        return Failure(FailureKind.UPSTREAM_TIMEOUT, f"the upstream did not answer in time: {exc}")
    if exc.status is None:
        return Failure(FailureKind.UPSTREAM_UNAVAILABLE, f"the upstream is unreachable: {exc}")
    return Failure(
        FailureKind.UPSTREAM_PROTOCOL,
        f"the upstream answered HTTP {exc.status}: {exc}",
        {"status": exc.status},
    )


class UpstreamLink:
    """One route's upstream.  Safe for many concurrent calls."""

    def __init__(
        self, settings: UpstreamSettings, adapters: AdapterSet, http: aiohttp.ClientSession
    ) -> None:
        self.settings = settings
        self.adapters = adapters
        self._http = http
        self._streamable = StreamableHttpCarrier(
            settings.url,
            http,
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.request_timeout,
        )
        # The carrier modern requests and the probe go through.
        self._primary: Carrier = self._streamable
        if settings.transport == "stdio":
            if not settings.command:
                raise ValueError("a stdio upstream needs a command")
            self._primary = StdioCarrier(
                settings.command, env=settings.env, cwd=settings.cwd, route=settings.route
            )
        self._verdict: Verdict | None = None
        self._probe_lock = asyncio.Lock()
        self._sessions: dict[str, LegacySession] = {}
        self._session_locks: dict[str, asyncio.Lock] = {}
        self._ids = itertools.count(1)
        # Stateless HTTP upstreams: tool arguments mirrored into Mcp-Param-* headers.
        self._param_paths: dict[str, dict[tuple[str, ...], str]] = {}
        self._tools_listed = False
        # Handshake-era upstreams: each tool's `execution.taskSupport`, from tools/list.
        self._task_support: dict[str, str | None] = {}
        self._task_tools_listed = False
        # Background work: cancel notices, answers to requests off any call stream.
        self._cancels: set[asyncio.Task[None]] = set()
        # Where session-level notifications go, with the scope they arrived in.
        self._notify: NotificationSink | None = None
        self._on_session: Callable[[str], Coroutine[Any, Any, None]] | None = None

    # ------------------------------------------------------------ the verdict

    @property
    def verdict(self) -> Verdict | None:
        return self._verdict

    async def profile(
        self, principal: str = "anonymous", headers: Mapping[str, str] = {}
    ) -> ServerProfile:
        verdict = await self.ensure(principal, headers)
        return verdict.profile

    async def ensure(self, principal: str, headers: Mapping[str, str]) -> Verdict:
        if self._verdict is not None:
            return self._verdict
        async with self._probe_lock:
            if self._verdict is None:
                self._verdict = await self._probe(principal, headers)
                log.info(
                    "upstream era detected",
                    upstream=self.settings.url,
                    revision=self._verdict.adapter.version,
                    transport=self._verdict.transport,
                    stateless=not self._verdict.adapter.has_handshake,
                )
            return self._verdict

    @property
    def stateless(self) -> bool:
        """Whether the upstream is of the stateless era (known once probed)."""
        return self._verdict is not None and not self._verdict.adapter.has_handshake

    def forget(self) -> None:
        """The verdict stopped holding: probe again on the next call."""
        self._verdict = None

    async def _probe(self, principal: str, headers: Mapping[str, str]) -> Verdict:
        pinned = self.settings.version
        if pinned is not None:
            adapter = self.adapters.by_version.get(pinned)
            if adapter is None:
                raise Failure(FailureKind.INTERNAL, f"unknown pinned revision {pinned}")
            if not adapter.has_handshake:
                return await self._discover(adapter, headers)
            return await self._legacy_verdict(principal, headers, adapter)
        if self.settings.transport != "sse":
            if self.settings.transport == "stdio":
                await self._start(self._primary)
            for modern in self.adapters.stateless:
                verdict = await self._try_modern(modern, headers)
                if verdict is not None:
                    return verdict
        return await self._legacy_verdict(principal, headers, None)

    async def _discover(self, adapter: Adapter, headers: Mapping[str, str]) -> Verdict:
        message = adapter.client_opening(next(self._ids), self.settings.client_info, {})
        try:
            response = await self._roundtrip(
                self._primary, message, {**headers, **adapter.client_headers(None, None, message)}
            )
        except CarrierError as exc:
            raise carrier_failure(exc) from exc
        if "result" not in response:
            failure = adapter.client_read_failure(response.get("error"))
            raise Failure(
                FailureKind.UPSTREAM_PROTOCOL, f"server/discover failed: {failure.message}"
            )
        transport = "stdio" if self.settings.transport == "stdio" else "http"
        return Verdict(adapter, transport, adapter.client_read_profile(response["result"]))

    async def _try_modern(self, adapter: Adapter, headers: Mapping[str, str]) -> Verdict | None:
        """A modern request first; a recognised modern answer means a modern server."""
        message = adapter.client_opening(next(self._ids), self.settings.client_info, {})
        transport = "stdio" if self.settings.transport == "stdio" else "http"
        try:
            # Legacy stdio servers may never answer a method they do not know.
            async with asyncio.timeout(self.settings.probe_timeout):
                response = await self._roundtrip(
                    self._primary,
                    message,
                    {**headers, **adapter.client_headers(None, None, message)},
                    probe=True,
                )
        except TimeoutError:
            if transport == "stdio":
                return None  # no answer in time: legacy, as the stdio fallback rule says
            raise carrier_failure(CarrierError("the probe timed out", timeout=True)) from None
        except CarrierError as exc:
            if exc.status is None or exc.status in _REFUSED:
                # 401/403: the upstream needs credentials, not another transport.
                raise carrier_failure(exc) from exc
            return None  # a 4xx without a modern error body: a legacy server
        if "result" in response and isinstance(response["result"], dict):
            return Verdict(adapter, transport, adapter.client_read_profile(response["result"]))
        error = response.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        if code not in MODERN_PROBE_CODES:
            return None
        if code == -32022 and isinstance(error, dict):
            data = error.get("data") or {}
            for version in data.get("supported") or []:
                other = self.adapters.by_version.get(version)
                if other is not None and not other.has_handshake and other is not adapter:
                    return await self._discover(other, headers)
        return None

    async def _legacy_verdict(
        self, principal: str, headers: Mapping[str, str], pinned: Adapter | None
    ) -> Verdict:
        transport = self.settings.transport
        if transport == "stdio":
            try:
                session = await self._open_session("stdio", headers, pinned)
            except CarrierError as exc:
                raise carrier_failure(exc) from exc
            self._sessions[self._session_key(principal)] = session
            if self.settings.per_principal:
                await self._primary.close()  # it only answered the probe
            return Verdict(session.adapter, "stdio", session.profile)
        if transport in ("auto", "http"):
            try:
                session = await self._open_session("http", headers, pinned)
            except CarrierError as exc:
                if (
                    transport == "http"
                    or exc.status is None
                    or exc.status >= 500
                    or exc.status in _REFUSED
                ):
                    raise carrier_failure(exc) from exc
                transport = "sse"  # the spec's fallback: POST refused, try the old GET stream
            else:
                self._sessions[principal] = session
                return Verdict(session.adapter, "http", session.profile)
        endpoint = await open_legacy_sse_probe(
            self._http, self.settings.url, self.settings.probe_timeout, headers
        )
        if endpoint is None:
            raise Failure(
                FailureKind.UPSTREAM_PROTOCOL,
                "the upstream speaks no MCP transport the gateway recognises "
                "(no modern answer, no initialize over Streamable HTTP, no HTTP+SSE stream)",
            )
        try:
            session = await self._open_session("sse", headers, pinned)
        except CarrierError as exc:
            raise carrier_failure(exc) from exc
        self._sessions[principal] = session
        return Verdict(session.adapter, "sse", session.profile)

    # --------------------------------------------------------- legacy sessions

    async def _open_session(
        self, transport: str, headers: Mapping[str, str], pinned: Adapter | None
    ) -> LegacySession:
        offer = pinned or self.adapters.handshake[0]
        carrier: Carrier
        if transport == "sse":
            carrier = LegacySseCarrier(
                self.settings.url,
                self._http,
                headers=headers,
                connect_timeout=self.settings.connect_timeout,
                endpoint_timeout=self.settings.probe_timeout,
                read_timeout=self.settings.request_timeout,
            )
            await carrier.start()
        elif transport == "stdio":
            # A child per caller: a session of its own, which no other caller shares.
            carrier = self._child() if self.settings.per_principal else self._primary
            await self._start(carrier)
        else:
            carrier = self._streamable
        message = offer.client_opening(
            next(self._ids), self.settings.client_info, self.settings.client_capabilities
        )
        exchange = await carrier.request(
            message, {**headers, **offer.client_headers(None, None, message)}
        )
        response = await _final(exchange, message["id"])
        await exchange.aclose()
        if "result" not in response or not isinstance(response["result"], dict):
            failure = offer.client_read_failure(response.get("error"))
            raise CarrierError(f"initialize was refused: {failure.message}", status=400)
        result = response["result"]
        adapter = self.adapters.by_version.get(str(result.get("protocolVersion")))
        if adapter is None or not adapter.has_handshake:
            raise Failure(
                FailureKind.UPSTREAM_PROTOCOL,
                f"the upstream chose protocol revision {result.get('protocolVersion')!r}, "
                "which the gateway does not speak",
            )
        session_id = exchange.headers.get("mcp-session-id") if exchange.headers else None
        owns = transport == "sse" or (transport == "stdio" and carrier is not self._primary)
        session = LegacySession(
            adapter, carrier, session_id, adapter.client_read_profile(result), owns
        )
        session.headers = {**headers, **adapter.client_headers(None, session_id)}
        await carrier.send(rpc.notification("notifications/initialized"), session.headers)
        session.listener = asyncio.get_running_loop().create_task(self._listen(session))
        return session

    async def _listen(self, session: LegacySession) -> None:
        """The session's own channel (GET stream, or what HTTP+SSE could not attribute):
        server requests and notifications that arrive outside any call's stream."""
        for attempt in range(LISTEN_RETRIES):
            if attempt:
                # The stream dropped while the session lives on: open it again, after
                # a short pause that grows, or list changes and updates are lost.
                await asyncio.sleep(min(0.2 * 2**attempt, 5.0))
                if session.closed:
                    return
            try:
                stream = await session.carrier.listen(session.headers)
                if stream is None:
                    return  # the upstream offers no such stream
                async for message in stream:
                    if rpc.is_request(message):
                        task = asyncio.get_running_loop().create_task(
                            self._unsolicited_request(session, message)
                        )
                        self._cancels.add(task)
                        task.add_done_callback(self._cancels.discard)
                    else:
                        await self._unsolicited_event(session, message)
            except CarrierError as exc:
                log.info(
                    "upstream session stream ended", upstream=self.settings.url, reason=str(exc)
                )
            except asyncio.CancelledError:
                raise
            except Exception:  # a broken stream must not take the link down
                log.exception("upstream session stream failed", upstream=self.settings.url)
            if session.carrier.is_session:
                return  # HTTP+SSE and stdio: the stream is the session; it ends with it

    def _owner(self, session: LegacySession) -> tuple[int, Exchange] | None:
        """A message off any call's stream belongs to a call only if just one could have
        sent it: one call in flight that is not itself blocked on an ask."""
        running = [
            (upstream_id, exchange)
            for upstream_id, (exchange, _) in session.inflight.items()
            if upstream_id not in session.waiting
        ]
        return running[0] if len(running) == 1 else None

    async def _unsolicited_request(self, session: LegacySession, message: dict[str, Any]) -> None:
        owner = self._owner(session)
        if owner is not None:
            session.waiting.add(owner[0])
            try:
                answer = await self._server_request(session.adapter, message, owner[1])
            finally:
                session.waiting.discard(owner[0])
        elif message.get("method") != Operation.PING.value:
            kind = AskKind.for_method(str(message.get("method")))
            answer = (
                session.adapter.client_answer(message["id"], Answer.refusal(kind))
                if kind is not None
                else rpc.error(message["id"], -32601, f"Method not found: {message.get('method')}")
            )
        else:
            answer = await self._server_request(session.adapter, message, None)
        with contextlib.suppress(CarrierError):
            await session.carrier.send(answer, session.headers)

    async def _unsolicited_event(self, session: LegacySession, message: dict[str, Any]) -> None:
        event = session.adapter.client_read_event(message)
        if event is None:
            return
        token = event.progress_token
        if token is not None:
            for upstream_id, (exchange, original) in list(session.inflight.items()):
                if upstream_id == token and original is not None:
                    params = {**event.params, "progressToken": original}
                    await exchange.emit(replace(event, params=params))
            return
        if event.method in SESSION_NOTIFICATIONS:
            scope = next((key for key, s in self._sessions.items() if s is session), None)
            if scope is not None and self._notify is not None:
                await self._notify(scope, event)
            return
        owner = self._owner(session)
        if owner is not None and event.method == "notifications/message":
            await owner[1].emit(event)

    # ------------------------------------------------------ change notifications

    def on_notification(self, sink: NotificationSink | None) -> None:
        """Session-level notifications (list changes, resource updates) go to ``sink``,
        with the scope (``scope(principal)``) of the upstream session they came in."""
        self._notify = sink

    def on_session(self, callback: Callable[[str], Coroutine[Any, Any, None]] | None) -> None:
        """``callback(scope)`` runs whenever a handshake-era upstream session is opened
        after the first (re-opened after it expired, or after a restart)."""
        self._on_session = callback

    def scope(self, principal: str) -> str:
        """Which upstream session (or stateless listen) serves ``principal``."""
        return self._session_key(principal)

    async def attach(self, principal: str, headers: Mapping[str, str]) -> None:
        """Open ``principal``'s legacy upstream session (and its own stream) if it is not
        open yet, so its session-level notifications arrive.  Raises on failure."""
        verdict = await self.ensure(principal, headers)
        if verdict.adapter.has_handshake:
            await self._session(principal, headers, verdict)

    async def listen(self, call: Call, exchange: Exchange) -> AsyncIterator[Event]:
        """A stateless upstream's `subscriptions/listen`: its notifications (the
        acknowledgement first), until the upstream ends it (returns) or the stream is
        lost (raises CarrierError or Failure).  Closing the iterator closes the listen."""
        verdict = await self.ensure(exchange.principal, exchange.forward_headers)
        adapter = verdict.adapter
        if adapter.has_handshake:
            raise Failure(FailureKind.INTERNAL, "a handshake-era upstream has no listen")
        if self._primary.is_session:
            await self._start(self._primary)
        upstream_id = next(self._ids)
        message = adapter.client_request(call, upstream_id)
        headers = {**exchange.forward_headers, **adapter.client_headers(call, None)}
        reply = await self._primary.stream(message, headers)
        answered = False
        try:
            async for incoming in reply.messages:
                if _answers(incoming, upstream_id, reply.status):
                    answered = True
                    outcome = adapter.client_read_response(call, incoming)
                    if isinstance(outcome, Failure):
                        raise outcome
                    return  # the upstream ended the listen gracefully
                event = adapter.client_read_event(incoming)
                if event is not None:
                    yield event
            raise CarrierError("the upstream listen stream ended")
        finally:
            await reply.aclose()
            if not answered and _must_notify(adapter, self._primary):
                await self._cancel_quietly(adapter, self._primary, headers, upstream_id)

    def _session_key(self, principal: str) -> str:
        """One stdio process holds one session: the route's callers share it unless
        the route runs a child per caller."""
        shared = self.settings.transport == "stdio" and not self.settings.per_principal
        return "stdio" if shared else principal

    def _child(self) -> StdioCarrier:
        settings = self.settings
        assert settings.command is not None
        return StdioCarrier(
            settings.command, env=settings.env, cwd=settings.cwd, route=settings.route
        )

    async def _start(self, carrier: Carrier) -> None:
        """Start (or, after a crash, restart) a carrier that is a process of its own."""
        try:
            await carrier.start()
        except CarrierError as exc:
            raise carrier_failure(exc) from exc

    async def _session(
        self, principal: str, headers: Mapping[str, str], verdict: Verdict
    ) -> LegacySession:
        principal = self._session_key(principal)
        session = self._sessions.get(principal)
        if session is not None:
            return session
        lock = self._session_locks.setdefault(principal, asyncio.Lock())
        async with lock:
            session = self._sessions.get(principal)
            if session is None:
                session = await self._open_session(verdict.transport, headers, verdict.adapter)
                self._sessions[principal] = session
                if self._on_session is not None:
                    # A new upstream session knows none of the old one's subscriptions.
                    task: asyncio.Task[None] = asyncio.get_running_loop().create_task(
                        self._on_session(principal)
                    )
                    self._cancels.add(task)
                    task.add_done_callback(self._cancels.discard)
            return session

    async def _drop_session(self, principal: str, session: LegacySession) -> None:
        session.closed = True
        principal = self._session_key(principal)
        if self._sessions.get(principal) is session:
            del self._sessions[principal]
        if session.listener is not None:
            session.listener.cancel()
        if session.owns_carrier:
            await session.carrier.close()

    # ------------------------------------------------------------ running calls

    async def execute(self, call: Call, exchange: Exchange) -> Outcome:
        """Run one call upstream, in the upstream's revision; events go to ``exchange``."""
        try:
            verdict = await self.ensure(exchange.principal, exchange.forward_headers)
        except Failure as failure:
            return failure
        if not verdict.adapter.has_handshake:
            return await self._execute_modern(verdict.adapter, call, exchange)
        for attempt in range(2):
            try:
                session = await self._session(exchange.principal, exchange.forward_headers, verdict)
            except CarrierError as exc:
                return carrier_failure(exc)
            except Failure as failure:
                return failure
            try:
                await self._ensure_level(session, call, exchange)
                outcome = await self._run(
                    session.adapter, session.carrier, session.session_id, call, exchange, session
                )
                if call.operation is Operation.TOOLS_LIST and isinstance(outcome, Value):
                    self._learn_task_support(outcome)
                return outcome
            except CarrierError as exc:
                await self._drop_session(exchange.principal, session)
                expired = exc.status == 404 and session.session_id is not None
                if attempt == 0 and (
                    expired or (session.carrier.is_session and exc.status is None)
                ):
                    continue  # the session ended upstream: initialize again, once
                return carrier_failure(exc)
        raise AssertionError("unreachable")

    async def _ensure_level(self, session: LegacySession, call: Call, exchange: Exchange) -> None:
        """Logging is session-wide on a handshake-era upstream and per request for
        stateless clients: keep the upstream at the most verbose level any call asked
        for (logs are filtered per request on the way back)."""
        wanted = call.client.log_level
        if wanted not in LOG_LEVELS or "logging" not in session.profile.capabilities:
            return
        current = session.log_level
        if current is not None and LOG_LEVELS.index(current) <= LOG_LEVELS.index(wanted):
            return
        session.log_level = wanted
        set_level = Call(
            id=0,
            operation=Operation.SET_LOG_LEVEL,
            method=Operation.SET_LOG_LEVEL.value,
            params={"level": wanted},
            client=call.client,
        )
        quiet = replace(exchange, emit=_ignore_event, ask=None)
        outcome = await self._run(
            session.adapter, session.carrier, session.session_id, set_level, quiet, session
        )
        if isinstance(outcome, Failure):
            session.log_level = current
            log.info("the upstream refused logging/setLevel", reason=outcome.message)

    async def _execute_modern(self, adapter: Adapter, call: Call, exchange: Exchange) -> Outcome:
        try:
            if self._primary.is_session:
                await self._start(self._primary)  # a stateless server: restart freely
            extra = await self._param_headers(adapter, call, exchange)
            outcome = await self._run(adapter, self._primary, None, call, exchange, None, extra)
        except CarrierError as exc:
            return carrier_failure(exc)
        except Failure as failure:
            return failure
        if call.operation is Operation.TOOLS_LIST and isinstance(outcome, Value):
            outcome = self._learn_tools(adapter, outcome)
        if isinstance(outcome, Failure) and outcome.kind is FailureKind.UNSUPPORTED_VERSION:
            self.forget()  # the upstream changed revision under us
        return outcome

    # ------------------------------------------- tool parameters in headers

    def _learn_tools(self, adapter: Adapter, outcome: Value) -> Value:
        """Remember which tool arguments go into headers; drop tools whose
        annotations break the rules (an HTTP client of the stateless era must)."""
        tools = outcome.result.get("tools")
        if self._primary is not self._streamable or not isinstance(tools, list):
            return outcome
        kept = []
        for tool in tools:
            name = tool.get("name") if isinstance(tool, dict) else None
            paths = adapter.client_param_paths(tool) if isinstance(tool, dict) else {}
            if paths is None:
                log.warning("dropping a tool with an invalid x-mcp-header", tool=name)
                continue
            if isinstance(name, str):
                self._param_paths[name] = paths
            kept.append(tool)
        return Value({**outcome.result, "tools": kept}) if len(kept) != len(tools) else outcome

    # ------------------------------------------------- tools that run as tasks

    def _learn_task_support(self, outcome: Value) -> None:
        tools = outcome.result.get("tools")
        for tool in tools if isinstance(tools, list) else []:
            name = tool.get("name") if isinstance(tool, dict) else None
            if isinstance(name, str):
                execution = tool.get("execution")
                support = execution.get("taskSupport") if isinstance(execution, dict) else None
                self._task_support[name] = support if isinstance(support, str) else None

    async def task_support(self, call: Call, exchange: Exchange) -> str | None:
        """The called tool's `execution.taskSupport` (its tool list is read once
        when the tool was never listed)."""
        name = call.params.get("name")
        if not isinstance(name, str):
            return None
        if name not in self._task_support and not self._task_tools_listed:
            self._task_tools_listed = True
            quiet = replace(exchange, emit=_ignore_event, ask=None)
            cursor: str | None = None
            for _ in range(100):  # pages, bounded
                listing = Call(
                    id=0,
                    operation=Operation.TOOLS_LIST,
                    method=Operation.TOOLS_LIST.value,
                    params={"cursor": cursor} if cursor else {},
                    client=call.client,
                )
                outcome = await self.execute(listing, quiet)
                if not isinstance(outcome, Value):
                    break
                cursor = outcome.result.get("nextCursor")
                if not isinstance(cursor, str) or not cursor:
                    break
        return self._task_support.get(name)

    async def _param_headers(
        self, adapter: Adapter, call: Call, exchange: Exchange
    ) -> dict[str, str]:
        if call.operation is not Operation.TOOLS_CALL or self._primary is not self._streamable:
            return {}
        name = call.params.get("name")
        if not isinstance(name, str):
            return {}
        if name not in self._param_paths and not self._tools_listed:
            await self._list_tools(adapter, call, exchange)
        paths = self._param_paths.get(name)
        arguments = call.params.get("arguments")
        if not paths or not isinstance(arguments, dict):
            return {}
        return adapter.client_param_headers(paths, arguments)

    async def _list_tools(self, adapter: Adapter, call: Call, exchange: Exchange) -> None:
        """Read the upstream's tool list once, for a call made before any list."""
        self._tools_listed = True
        cursor: str | None = None
        for _ in range(100):  # pages, bounded
            params = {"cursor": cursor} if cursor else {}
            listing = Call(
                id=0,
                operation=Operation.TOOLS_LIST,
                method="tools/list",
                params=params,
                client=call.client,
            )
            quiet = replace(exchange, emit=_ignore_event, ask=None)
            outcome = await self._run(adapter, self._primary, None, listing, quiet)
            if not isinstance(outcome, Value):
                return
            self._learn_tools(adapter, outcome)
            cursor = outcome.result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                return

    async def _run(
        self,
        adapter: Adapter,
        carrier: Carrier,
        session_id: str | None,
        call: Call,
        exchange: Exchange,
        session: LegacySession | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> Outcome:
        upstream_id = next(self._ids)
        if session is not None:
            session.inflight[upstream_id] = (exchange, call.progress_token)
        try:
            return await self._exchange(
                adapter, carrier, session_id, call, exchange, upstream_id, session, extra_headers
            )
        finally:
            if session is not None:
                session.inflight.pop(upstream_id, None)

    async def _exchange(
        self,
        adapter: Adapter,
        carrier: Carrier,
        session_id: str | None,
        call: Call,
        exchange: Exchange,
        upstream_id: int,
        session: LegacySession | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> Outcome:
        # Progress tokens are rewritten so concurrent clients never collide upstream.
        token = call.progress_token
        upstream_call = replace(call, progress_token=upstream_id) if token is not None else call
        message = adapter.client_request(upstream_call, upstream_id)
        headers = {
            **exchange.forward_headers,
            **adapter.client_headers(call, session_id),
            **(extra_headers or {}),
        }
        try:
            reply = await carrier.request(message, headers)
        except CarrierError as exc:
            if exc.timeout and _must_notify(adapter, carrier) and call.id is not None:
                # No answer in time: a legacy upstream is told to stop, as the spec asks.
                await self._cancel_quietly(adapter, carrier, headers, upstream_id, "timed out")
            raise
        except asyncio.CancelledError:
            # Cancelled before the upstream even answered (the client cancelled or left).
            if _must_notify(adapter, carrier) and call.id is not None:
                await self._cancel_quietly(adapter, carrier, headers, upstream_id)
            raise
        if reply.status == 404 and session_id is not None:
            # The upstream forgot the session (restarted, or expired it): whatever
            # the body says, the caller opens a new one and retries.
            await reply.aclose()
            raise CarrierError("the upstream no longer knows this session", status=404)
        finished = False
        try:
            async for incoming in reply.messages:
                if _answers(incoming, upstream_id, reply.status):
                    finished = True
                    return adapter.client_read_response(call, incoming)
                if rpc.is_request(incoming):
                    if session is not None:
                        session.waiting.add(upstream_id)
                    try:
                        answer = await self._server_request(adapter, incoming, exchange)
                    finally:
                        if session is not None:
                            session.waiting.discard(upstream_id)
                    await carrier.send(answer, headers)
                    continue
                event = adapter.client_read_event(incoming)
                if event is None:
                    continue
                if token is not None and event.progress_token == upstream_id:
                    event = replace(event, params={**event.params, "progressToken": token})
                await exchange.emit(event)
            finished = True
            return Failure(
                FailureKind.UPSTREAM_PROTOCOL, "the upstream ended the exchange without answering"
            )
        finally:
            await reply.aclose()
            if not finished and _must_notify(adapter, carrier) and call.id is not None:
                # The client went away: tell the upstream to stop, unless closing the
                # stream already said so (a stateless server's own POST stream).
                await self._cancel_quietly(adapter, carrier, headers, upstream_id)

    async def _cancel_quietly(
        self,
        adapter: Adapter,
        carrier: Carrier,
        headers: Mapping[str, str],
        upstream_id: int,
        reason: str = "client went away",
    ) -> None:
        notice = rpc.notification(
            "notifications/cancelled", {"requestId": upstream_id, "reason": reason}
        )

        async def send() -> None:
            with contextlib.suppress(CarrierError):
                await carrier.send(notice, headers)

        # Sent in the background: a stuck upstream, which may not answer this POST
        # either, must not hold back the caller's answer for another timeout.
        task = asyncio.ensure_future(send())
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _server_request(
        self, adapter: Adapter, message: dict[str, Any], exchange: Exchange | None
    ) -> dict[str, Any]:
        """Answer a request the upstream sent mid-call: ping here, asks via the client."""
        method = message.get("method")
        if method == Operation.PING.value:
            return rpc.result(message["id"], {})
        asks = adapter.client_input_requests(message)
        if not asks:
            return rpc.error(message["id"], -32601, f"Method not found: {method}")
        ask = next(iter(asks.values()))
        answer = await exchange.ask(ask) if exchange is not None and exchange.ask else None
        if answer is None:
            answer = Answer.refusal(ask.kind)
        if ask.kind is AskKind.LIST_ROOTS and answer.result is None and answer.error is None:
            answer = Answer(result={"roots": []})
        return adapter.client_answer(message["id"], answer)

    # ------------------------------------------------------------------ misc

    async def _roundtrip(
        self,
        carrier: Carrier,
        message: dict[str, Any],
        headers: Mapping[str, str],
        probe: bool = False,
    ) -> dict[str, Any]:
        exchange = await carrier.request(message, headers)
        try:
            return await _final(exchange, message["id"])
        finally:
            await exchange.aclose()

    async def close(self) -> None:
        """End every upstream session (DELETE) and close every carrier."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        for session in sessions:
            if session.listener is not None:
                session.listener.cancel()
            try:
                if session.session_id is not None:
                    headers = session.adapter.client_headers(None, session.session_id)
                    await session.carrier.terminate(headers)
                if session.owns_carrier:
                    await session.carrier.close()
            except CarrierError:
                pass
        for task in list(self._cancels):
            task.cancel()
        await self._streamable.close()
        if self._primary is not self._streamable:
            await self._primary.close()


async def _final(exchange: CarrierExchange, request_id: Any) -> dict[str, Any]:
    async for message in exchange.messages:
        if _answers(message, request_id, exchange.status):
            return message
    raise CarrierError("the upstream closed the exchange before answering")


def _answers(message: dict[str, Any], request_id: Any, status: int = 200) -> bool:
    """Whether ``message`` answers ``request_id``.  An error that came back as the
    HTTP error answer to this very request answers it whatever id it quotes
    (servers put null, or even made-up ids, where they could not read ours)."""
    if "method" in message or not ("result" in message or "error" in message):
        return False
    if message.get("id") == request_id:
        return True
    return "error" in message and (message.get("id") is None or status >= 400)


def _must_notify(adapter: Adapter, carrier: Carrier) -> bool:
    """Whether stopping a call needs a `notifications/cancelled` (not just a closed stream)."""
    return adapter.has_handshake or not carrier.cancels_by_close


async def _ignore_event(event: Event) -> None:
    return None
