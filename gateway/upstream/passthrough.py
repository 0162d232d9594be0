"""The pass-through lane's upstream side: a call of the upstream's own revision sent
on without the full path's layers, its answer handed back as the upstream sent it.

The request is what the full path would send (the same adapter encodes it, with the
same upstream request id and progress token); what is skipped is the work around
it that a call of the same revision does not need.  The upstream's first message
decides the rest: the call's plain, complete result is the answer; anything else (an
error, a question, a notification first, a broken or late reply) is *held* and the
full path reads on from exactly there (:class:`Held`), so everything it does with
an answer -- failure wording, retries, questions, events -- is its own, unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

from gateway.core import Call, Exchange, Operation, ServerProfile
from gateway.protocol import Adapter
from gateway.upstream.carriers.base import (
    Carrier,
    CarrierError,
    Message,
    UpstreamReply,
    is_response_to,
)

# Where a held reply travels to the full path (``Exchange.extra``).
HELD = "held"


@dataclass(slots=True)
class Held:
    """A call already sent upstream, whose reply the full path reads (once)."""

    upstream_id: int
    headers: dict[str, str]
    reply: UpstreamReply | None = None
    error: CarrierError | None = None
    taken: bool = False

    def take(self) -> UpstreamReply:
        if self.error is not None:
            raise self.error
        assert self.reply is not None
        return self.reply

    async def aclose(self) -> None:
        """Closed here if the full path never took it (it closes what it takes)."""
        if self.reply is not None and not self.taken:
            await self.reply.aclose()


def held_of(exchange: Exchange) -> Held | None:
    """The held reply an exchange carries, taken (a retry sends afresh)."""
    held = exchange.extra.pop(HELD, None) if exchange.extra else None
    if not isinstance(held, Held):
        return None
    held.taken = True
    return held


async def send(
    adapter: Adapter,
    carrier: Carrier,
    call: Call,
    upstream_id: int,
    forward_headers: dict[str, str],
    deadline: float | None,
    profile: ServerProfile,
) -> dict[str, Any] | Held:
    """``call`` sent on ``carrier`` in ``adapter``'s revision: its plain result, or
    the reply held for the full path."""
    sent = replace(call, progress_token=upstream_id) if call.progress_token is not None else call
    message, own = adapter.client_outgoing(sent, upstream_id, None)
    headers = {**forward_headers, **own}
    reply: UpstreamReply | None = None
    try:
        async with asyncio.timeout(deadline):
            reply = await carrier.request(message, headers)
            first = await anext(reply.messages, None)
    except CarrierError as exc:
        await _close(reply)
        return Held(upstream_id, headers, error=exc)
    except TimeoutError:
        await _close(reply)
        late = CarrierError(f"no answer within the route's timeout of {deadline:g} s", timeout=True)
        return Held(upstream_id, headers, error=late)
    except BaseException:
        await _close(reply)
        raise
    assert reply is not None
    if first is not None and is_response_to(first, upstream_id, reply.status):
        plain = reply.status == 200
        result = adapter.verbatim_result(call.operation, first, profile) if plain else None
        if result is not None:
            await reply.aclose()
            return result
    messages = _again(first, reply.messages) if first is not None else reply.messages
    return Held(upstream_id, headers, replace(reply, messages=messages))


async def _close(reply: UpstreamReply | None) -> None:
    if reply is not None:
        with contextlib.suppress(Exception):
            await reply.aclose()


async def _again(first: Message, rest: AsyncIterator[Message]) -> AsyncIterator[Message]:
    """The reply's messages with the one already read put back in front."""
    try:
        yield first
        async for message in rest:
            yield message
    finally:
        closer = getattr(rest, "aclose", None)
        if closer is not None:
            await closer()


def tool_plain(operation: Operation, facts: Any) -> bool:
    """A tools/call's tool, as the caller's list said: known, no header parameters to
    mint or check, and not a task-only tool (prompts need no facts)."""
    if operation is not Operation.TOOLS_CALL:
        return True
    return (
        facts is not None
        and not facts.param_paths
        and not facts.declared
        and facts.task_support != "required"
    )
