"""The inbound HTTP endpoint: Streamable HTTP and the old HTTP+SSE transport on one path.

I/O only.  Which revision a request speaks is the AdapterSet's call; what a
message means is the adapter's; what to do about it is the forwarder's.  This
module moves bytes, keeps downstream sessions and picks JSON or SSE for each
answer.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import orjson
import structlog
from aiohttp import web

from gateway.auth.front import Admission
from gateway.core import (
    Call,
    ClientReply,
    DecodeFailure,
    Event,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    Preamble,
    ServerProfile,
)
from gateway.protocol import Adapter
from gateway.transport.common import (
    first_id,
    is_initialize,
    join_session,
    listen_id,
    observe,
    principal_of,
    push_asker,
    reporter,
    too_large,
    wanted,
)
from gateway.transport.route import Route
from gateway.transport.sessions import Session
from gateway.upstream.sse import encode_event

log = structlog.get_logger(__name__)

JSON = "application/json"
EVENT_STREAM = "text/event-stream"
SESSION_QUERY = "sessionId"


@dataclass
class Inbound:
    """What every call of one POST shares: who sent it, in which revision, to what."""

    adapter: Adapter
    principal: str
    forwarded: dict[str, str]
    profile: ServerProfile | None
    upstream_failure: Failure | None
    session: Session | None
    request: web.Request | None = None


class Responder:
    """One POST's answer: plain JSON unless something must be streamed first."""

    def __init__(self, request: web.Request, headers: dict[str, str]) -> None:
        self.request = request
        self.headers = headers
        self.stream: web.StreamResponse | None = None
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        async with self._lock:
            if self.stream is None:
                self.stream = web.StreamResponse(
                    status=200,
                    headers={
                        **self.headers,
                        "Content-Type": EVENT_STREAM,
                        "Cache-Control": "no-cache",
                    },
                )
                await self.stream.prepare(self.request)
            await self.stream.write(encode_event(orjson.dumps(message).decode(), event="message"))

    async def finish(self, message: Any, status: int = 200) -> web.StreamResponse:
        if self.stream is not None:
            await self.send(message)
            await self.stream.write_eof()
            return self.stream
        return web.Response(
            body=orjson.dumps(message), status=status, content_type=JSON, headers=self.headers
        )


class Endpoint:
    """The aiohttp handlers for one route."""

    def __init__(self, route: Route) -> None:
        self.route = route
        self.adapters = route.adapters
        self._background: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ helpers

    def _reporter(self, preamble: Preamble) -> Adapter:
        return reporter(self.adapters, preamble)

    def _refuse(
        self,
        adapter: Adapter,
        failure: Failure,
        id_: Any = None,
        headers: dict[str, str] | None = None,
    ) -> web.Response:
        message = adapter.encode_failure(id_, failure)
        return web.Response(
            body=orjson.dumps(message),
            status=adapter.http_status(failure),
            content_type=JSON,
            headers={**failure.headers, **(headers or {})},
        )

    async def profile(self, principal: str, headers: dict[str, str]) -> ServerProfile:
        return await self.route.profile(principal, headers)

    async def _admit(self, request: web.Request) -> Admission:
        """The route's credential check (OAuth), before anything else is done."""
        if self.route.auth is None:
            return Admission()
        return await self.route.auth.admit(request)

    def _forwarded(self, headers: dict[str, str]) -> dict[str, str]:
        return {name: headers[name] for name in self.route.forward_headers if name in headers}

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --------------------------------------------------------------- POST

    async def post(self, request: web.Request) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        legacy_sse_id = request.query.get(SESSION_QUERY)
        session_id = legacy_sse_id or headers.get("mcp-session-id")
        session = self.route.sessions.get(session_id)
        preamble = Preamble(
            body=None,
            headers=headers,
            http_method="POST",
            transport="sse" if legacy_sse_id is not None else "http",
            session=session.view if session is not None else None,
            peer=request.remote or "",
        )
        refused = self.route.guard.check(headers)
        if refused is not None:
            return self._refuse(self._reporter(preamble), refused)
        admitted = await self._admit(request)
        if admitted.failure is not None:
            return self._refuse(self._reporter(preamble), admitted.failure)
        if request.content_length is not None and request.content_length > self.route.max_body:
            return self._refuse(self._reporter(preamble), too_large(self.route.max_body))
        try:
            raw = await _read_body(request, self.route.max_body + 1)
        except (ConnectionError, asyncio.IncompleteReadError):
            return web.Response(status=400)
        if len(raw) > self.route.max_body:
            return self._refuse(self._reporter(preamble), too_large(self.route.max_body))
        try:
            preamble.body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            preamble.parse_error = f"Parse error: {exc}"
            return self._refuse(
                self._reporter(preamble), Failure(FailureKind.PARSE_ERROR, preamble.parse_error)
            )

        if session_id is not None and session is None:
            failure = Failure(FailureKind.SESSION_NOT_FOUND, "Session not found (expired or ended)")
            return self._refuse(self._reporter(preamble), failure, first_id(preamble.body))
        selected = self.adapters.select(preamble)
        if isinstance(selected, Failure):
            return self._refuse(self._reporter(preamble), selected, first_id(preamble.body))
        adapter = selected
        refusal = adapter.check_http(preamble)
        if refusal is not None:
            return self._refuse(adapter, refusal, first_id(preamble.body))
        if (
            adapter.has_handshake
            and session is None
            and adapter.session_header
            and not is_initialize(preamble.body)
        ):
            failure = Failure(
                FailureKind.SESSION_REQUIRED, "Bad Request: missing Mcp-Session-Id header"
            )
            return self._refuse(adapter, failure, first_id(preamble.body))
        if (
            session is not None
            and session.view.protocol_version != adapter.version
            and adapter.has_handshake
        ) and not is_initialize(preamble.body):
            adapter = self.adapters.by_version.get(session.view.protocol_version, adapter)

        principal = admitted.principal or principal_of(headers)
        if session is not None:
            if admitted.principal is not None and session.principal != admitted.principal:
                failure = Failure(FailureKind.FORBIDDEN, "the session belongs to someone else")
                return self._refuse(adapter, failure, first_id(preamble.body))
            principal = session.principal
        forwarded = self._forwarded(headers)
        items = adapter.decode(preamble)
        ctx = Inbound(adapter, principal, forwarded, None, None, session, request)
        try:
            ctx.profile = await self.profile(principal, forwarded)
        except Failure as failure:
            ctx.upstream_failure = failure

        requests = [i for i in items if isinstance(i, Call) and not i.is_notification]
        failures = [i for i in items if isinstance(i, DecodeFailure)]
        response_headers: dict[str, str] = {}

        # The handshake: the gateway answers it itself, with a new session (none
        # when the upstream cannot be reached: that initialize is answered with an error).
        for item in requests:
            if item.operation is Operation.INITIALIZE and ctx.upstream_failure is None:
                if session is None:
                    session = self.route.sessions.create(
                        adapter.version, principal, item.client.capabilities, item.client.info
                    )
                    ctx.session = session
                else:
                    session.view.protocol_version = adapter.version
                    session.view.capabilities = item.client.capabilities
                    session.view.info = item.client.info
                if adapter.session_header and preamble.transport == "http":
                    response_headers["Mcp-Session-Id"] = session.id
                self._join(ctx, session, item)

        for entry in items:
            if isinstance(entry, ClientReply) and session is not None:
                session.resolve(entry.id, entry.answer)
            elif isinstance(entry, Call) and entry.is_notification:
                if entry.operation is Operation.INITIALIZED and session is not None:
                    session.view.initialized = True
                elif entry.operation is Operation.CANCELLED and session is not None:
                    session.cancel(entry.params.get("requestId"))
                elif ctx.profile is not None:
                    self._spawn(self._notify(ctx, entry))

        if not requests and not failures:
            return web.Response(status=202, headers=response_headers)

        if preamble.transport == "sse":
            # HTTP+SSE: the answer travels on the session's stream.
            assert session is not None
            for bad in failures:
                session.deliver(adapter.encode_failure(bad.id, bad.failure))
            for call in requests:
                self._spawn(self._answer_on_stream(ctx, call, session))
            return web.Response(status=202, text="Accepted")

        responder = Responder(request, response_headers)
        if isinstance(preamble.body, list):
            answers = [
                adapter.encode_failure(f.id, f.failure, None) for f in failures if f.id is not None
            ]
            results = await asyncio.gather(*(self._run(ctx, call, None) for call in requests))
            answers.extend(message for message, _ in results if message is not None)
            if failures and not answers:
                return self._refuse(adapter, failures[0].failure)
            return await responder.finish(answers)
        if failures:
            failure_item = failures[0]
            return self._refuse(adapter, failure_item.failure, failure_item.id, response_headers)
        message, status = await self._run(ctx, requests[0], responder)
        return await responder.finish(message, status)

    def _join(self, ctx: Inbound, session: Session, call: Call) -> None:
        """The session hears change notifications on its standalone stream while open."""
        assert ctx.profile is not None

        async def write(message: dict[str, Any]) -> None:
            if session.stream_open:
                session.deliver(message)

        join_session(
            self.route.forwarder.subscriptions,
            self.route.path,
            session,
            lambda: self.adapters.by_version.get(session.view.protocol_version),
            write,
            ctx.profile,
            principal=ctx.principal,
            headers=ctx.forwarded,
            client=call.client,
            lists=session.stream_open,
        )

    async def _run(
        self, ctx: Inbound, call: Call, responder: Responder | None
    ) -> tuple[dict[str, Any] | None, int]:
        """Run one call and encode its outcome; events go to ``responder``."""
        started = time.perf_counter()
        adapter, profile = ctx.adapter, ctx.profile
        outcome: Outcome
        if profile is None:
            assert ctx.upstream_failure is not None
            outcome = ctx.upstream_failure
            profile = ServerProfile()
        else:
            exchange = self._exchange(ctx, profile, call, responder)
            outcome = await self._handle(call, exchange, ctx.session)
        auth = self.route.auth
        if isinstance(outcome, Failure) and auth is not None and ctx.request is not None:
            # An upstream 401/403 reaches the client as such, its challenge kept.
            outcome = auth.passed_on(outcome, ctx.request)
            if responder is not None:
                responder.headers.update(outcome.headers)
        message = adapter.encode(call, profile, outcome)
        status = adapter.http_status(outcome) if isinstance(outcome, Failure) else 200
        if message is not None and "result" in message:
            status = 200
        self._observe(call, adapter, outcome, started)
        return message, status

    async def _handle(self, call: Call, exchange: Exchange, session: Session | None) -> Outcome:
        """Run the call as a task of its own, which the client's cancellation can stop."""
        task = asyncio.ensure_future(self.route.forwarder.handle(call, exchange))
        if session is not None and call.id is not None:
            session.running[call.id] = task
        try:
            return await task
        except Failure as failure:
            return failure
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the request itself went away
            return Failure(FailureKind.INTERNAL, "the request was cancelled by the client")
        finally:
            if session is not None and call.id is not None and session.running.get(call.id) is task:
                del session.running[call.id]

    async def _answer_on_stream(self, ctx: Inbound, call: Call, session: Session) -> None:
        message, _ = await self._run(ctx, call, None)
        if message is not None:
            session.deliver(message)

    async def _notify(self, ctx: Inbound, call: Call) -> None:
        assert ctx.profile is not None
        exchange = self._exchange(ctx, ctx.profile, call, None)
        try:
            await self.route.forwarder.handle(call, exchange)
        except Exception:  # a notification has nobody to tell; log and move on
            log.exception("notification failed", method=call.method)

    def _exchange(
        self, ctx: Inbound, profile: ServerProfile, call: Call, responder: Responder | None
    ) -> Exchange:
        adapter, session = ctx.adapter, ctx.session

        async def send(message: dict[str, Any]) -> None:
            if responder is not None:
                await responder.send(message)
            elif session is not None:
                session.deliver(message)

        async def emit(event: Event) -> None:
            if not wanted(event, call, session.view if session else None):
                return
            message = adapter.encode_event(event, listen_id(call))
            if message is not None:
                await send(message)

        asker = None
        if session is not None and (responder is not None or session.stream_open):
            asker = push_asker(adapter, session, send, self.route.ask_timeout)

        return Exchange(
            call=call,
            route=self.route.path,
            profile=profile,
            principal=ctx.principal,
            request_id=uuid.uuid4().hex,
            forward_headers=ctx.forwarded,
            emit=emit,
            ask=asker,
            can_park=adapter.carries_state,
            session=session.view if session is not None else None,
        )

    def _observe(self, call: Call, adapter: Adapter, outcome: Outcome, started: float) -> None:
        verdict = self.route.link.verdict
        upstream = verdict.adapter.version if verdict else None
        observe(self.route.observers, self.route.path, upstream, call, adapter, outcome, started)

    # ---------------------------------------------------------------- GET

    async def get(self, request: web.Request) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        refused = self.route.guard.check(headers)
        reporter = self.adapters.default_legacy
        if refused is not None:
            return self._refuse(reporter, refused)
        admitted = await self._admit(request)
        if admitted.failure is not None:
            return self._refuse(reporter, admitted.failure)
        if EVENT_STREAM not in headers.get("accept", "") and "*/*" not in headers.get("accept", ""):
            return self._refuse(
                reporter,
                Failure(FailureKind.NOT_ACCEPTABLE, "Accept must include text/event-stream"),
            )
        session_id = headers.get("mcp-session-id")
        version = headers.get("mcp-protocol-version")
        if version is not None:
            adapter = self.adapters.by_version.get(version)
            if adapter is not None and not adapter.has_handshake:
                return web.Response(status=405, headers={"Allow": "POST"})
        if session_id is None:
            return await self._legacy_sse_stream(request, headers, admitted.principal)
        session = self.route.sessions.get(session_id)
        if session is None:
            return self._refuse(
                reporter, Failure(FailureKind.SESSION_NOT_FOUND, "Session not found")
            )
        if session.stream_open:
            return web.Response(status=409, text="a stream is already open for this session")
        stream = web.StreamResponse(
            headers={"Content-Type": EVENT_STREAM, "Cache-Control": "no-cache"}
        )
        await stream.prepare(request)
        await self._pump(session, stream)
        return stream

    async def _legacy_sse_stream(
        self, request: web.Request, headers: dict[str, str], principal: str | None = None
    ) -> web.StreamResponse:
        """The HTTP+SSE transport: the stream, its `endpoint` event, then every message."""
        sse_capable = [a for a in self.adapters.handshake if "sse" in a.transports]
        if not sse_capable:
            return web.Response(status=405, headers={"Allow": "POST"})
        session = self.route.sessions.create(
            sse_capable[-1].version, principal or principal_of(headers)
        )
        stream = web.StreamResponse(
            headers={"Content-Type": EVENT_STREAM, "Cache-Control": "no-cache"}
        )
        await stream.prepare(request)
        endpoint = f"{request.path}?{SESSION_QUERY}={session.id}"
        await stream.write(encode_event(endpoint, event="endpoint"))
        try:
            await self._pump(session, stream)
        finally:
            # The HTTP+SSE session is the connection: it ends with it.
            self.route.sessions.delete(session.id)
        return stream

    async def _pump(self, session: Session, stream: web.StreamResponse) -> None:
        session.stream_open = True
        hub = self.route.forwarder.subscriptions
        if hub is not None:
            hub.want_lists(session.id, True)
        try:
            while True:
                message = await session.outbox.get()
                if message is None:
                    break
                await stream.write(encode_event(orjson.dumps(message).decode(), event="message"))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            session.stream_open = False
            if hub is not None:
                hub.want_lists(session.id, False)

    # ------------------------------------------------------------- DELETE

    async def delete(self, request: web.Request) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        refused = self.route.guard.check(headers)
        if refused is not None:
            return self._refuse(self.adapters.default_legacy, refused)
        admitted = await self._admit(request)
        if admitted.failure is not None:
            return self._refuse(self.adapters.default_legacy, admitted.failure)
        version = headers.get("mcp-protocol-version")
        modern = self.adapters.by_version.get(version) if version is not None else None
        if modern is not None and not modern.has_handshake:
            # The stateless revision has no sessions to end (as GET answers too).
            return web.Response(status=405, headers={"Allow": "POST"})
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            return web.Response(status=405 if not self.adapters.handshake else 400)
        if not self.route.sessions.delete(session_id):
            return self._refuse(
                self.adapters.default_legacy,
                Failure(FailureKind.SESSION_NOT_FOUND, "Session not found"),
            )
        return web.Response(status=200)

    async def close(self) -> None:
        await self.route.forwarder.close()
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        self.route.sessions.close_all()


async def _read_body(request: web.Request, limit: int) -> bytes:
    """The body, up to ``limit`` bytes (one `read(n)` returns only what has arrived)."""
    buf = bytearray()
    while len(buf) < limit:
        chunk = await request.content.read(limit - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)
