"""Small helpers of the inbound side (the pipeline and the transports' own checks)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog

from gateway.core import (
    Answer,
    Ask,
    Asker,
    Call,
    Event,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    Preamble,
    ServerProfile,
    SessionView,
    Value,
)
from gateway.core import jsonrpc as rpc
from gateway.core.log_context import request_field
from gateway.protocol import Adapter, AdapterSet, adapter_of
from gateway.protocol.models import LOG_LEVELS
from gateway.transport.responder import AnswerSent
from gateway.transport.sessions import Session

log = structlog.get_logger("gateway.transport.inbound")
T = TypeVar("T")

# The console's tap (gateway/console, only when it is on): the call, its client's
# revision, principal digest, server profile, outcome, the message the client gets
# and when the call started (perf_counter).
CallTap = Callable[[Call, str, str, ServerProfile, Outcome, dict[str, Any] | None, float], None]


def wanted(event: Event, call: Call, session: SessionView | None) -> bool:
    """Progress for this call's token; logs only at or above the level asked for."""
    if event.method == "notifications/progress":
        return call.progress_token is not None and event.progress_token == call.progress_token
    if event.method == "notifications/message":
        level = session.log_level if session is not None else call.client.log_level
        return log_wanted(event, level, session is not None)
    return True


def log_wanted(event: Event, level: str | None, has_session: bool) -> bool:
    """A log message at or above ``level``; with none set, stateless clients opt in
    per request (so hear nothing) and session clients hear what the server sends."""
    if level is None:
        return has_session
    wanted_level = event.params.get("level")
    return wanted_level in LOG_LEVELS and LOG_LEVELS.index(str(wanted_level)) >= (
        LOG_LEVELS.index(level)
    )


def listen_id(call: Call) -> Any:
    """The id a notification of ``call`` is tagged with: a listen's own id, else None."""
    return call.id if call.operation is Operation.LISTEN else None


def first_id(body: Any) -> Any:
    first = body[0] if isinstance(body, list) and body else body
    if isinstance(first, dict):
        value = first.get("id")
        if rpc.valid_id(value):
            return value
    return None


def is_initialize(body: Any) -> bool:
    return isinstance(body, dict) and body.get("method") == "initialize"


def too_large(limit: int) -> Failure:
    return Failure(FailureKind.PAYLOAD_TOO_LARGE, f"the request body exceeds {limit} bytes")


def reporter(adapters: AdapterSet, preamble: Preamble) -> Adapter:
    """The adapter to word a failure in when no adapter could be picked."""
    body = preamble.body if isinstance(preamble.body, dict) else {}
    params = body.get("params") if isinstance(body.get("params"), dict) else {}
    if isinstance(params, dict) and isinstance(params.get("_meta"), dict) and adapters.stateless:
        return adapters.stateless[0]
    if preamble.session is not None:
        adapter = adapter_of(preamble.session)
        if adapter is not None:
            return adapter
    return adapters.default_legacy


# How long telling a client that a question is withdrawn may take (a client whose
# stream is gone is not waited for).
WITHDRAW_WITHIN = 1.0


async def _withdraw(
    adapter: Adapter, request_id: Any, send: Callable[[dict[str, Any]], Awaitable[None]]
) -> None:
    """Tell the client a question it was asked is withdrawn: `notifications/cancelled`
    for the server's request (every revision has it), before whatever comes next."""
    notice = adapter.encode_event(
        Event("notifications/cancelled", {"requestId": request_id, "reason": "no longer needed"})
    )
    if notice is None:
        return
    with contextlib.suppress(Exception):
        async with asyncio.timeout(WITHDRAW_WITHIN):
            await send(notice)


def push_asker(
    adapter: Adapter,
    session: Session,
    send: Callable[[dict[str, Any]], Awaitable[None]],
    timeout: float,
) -> Asker | None:
    """Puts asks to a session client as server-initiated requests, where its revision
    carries them; the answer comes back as a client reply that resolves the future."""
    if not adapter.can_push_ask:
        return None

    async def asker(ask: Ask) -> Answer | None:
        if not ask.allowed_by(session.view.capabilities):
            return None  # not something this client can be asked
        refused = adapter.refuse_ask(ask)
        request_id, future = session.questions.ask(ask)
        message = adapter.encode_ask(ask, request_id)
        if message is None or refused is not None:
            session.questions.forget(request_id)
            # Not carried in the client's revision (None), or carried but not this
            # ask (the refusal says why).
            return refused if message is not None else None
        try:
            await send(message)
        except AnswerSent:  # its call was answered first: the question reached nobody
            session.questions.forget(request_id)
            return None
        try:
            return await asyncio.wait_for(future, timeout)
        except (TimeoutError, asyncio.CancelledError) as exc:
            session.questions.forget(request_id)
            current = asyncio.current_task()
            withdrawn = current is not None and current.cancelling() > 0
            if withdrawn or isinstance(exc, TimeoutError):  # the client need not answer now
                await _withdraw(adapter, request_id, send)
            if withdrawn:
                raise
            return Answer.refusal(ask.kind)  # timed out, or the session ended

    return asker


async def settle(
    work: Awaitable[T], graceful: Callable[[], bool] | None = None
) -> T | Failure | Value:
    """The call's outcome, a Failure raised or a cancellation by the client included.
    ``graceful()``: the cancellation was the gateway ending a listen, which ends as
    the spec asks (an empty result)."""
    try:
        return await work
    except Failure as failure:
        return failure
    except Exception:
        # A fault of the gateway's own: logged with its traceback and the request id
        # the client is given, and answered in the client's revision (never a 500,
        # never the exception's text, which may name the upstream's internals).
        log.exception("a call failed inside the gateway")
        return Failure(FailureKind.INTERNAL, f"the gateway failed on this call{request_ref()}")
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # the request itself went away
        if graceful is not None and graceful():
            return Value({})
        return Failure(FailureKind.INTERNAL, "the request was cancelled by the client")


def request_ref() -> str:
    """`` (request id X)`` from the log context, so a person can find the log line."""
    request_id = request_field("request_id")
    return f" (request id {request_id})" if request_id is not None else ""
