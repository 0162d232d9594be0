"""Whether a failed upstream call may be sent once more: only where it cannot harm.

A call that may have reached a server may have run there.  It is sent again only
when running it twice changes nothing: a method that only reads (lists, reads, a
prompt, a completion, a ping), or a ``tools/call`` whose tool says so itself
(``readOnlyHint: true`` or ``idempotentHint: true`` in its annotations, as its list
gave them).  A request that never left the gateway (no connection could be made)
cannot have run, whatever it is.  Never after a time-out (the call's own time is
spent), never after the client was asked something during the call (it would be
asked again), never more than once.
"""

from __future__ import annotations

from typing import Any, Protocol

from gateway.core import Answer, Ask, Call, Exchange, Failure, FailureKind, Operation, Outcome
from gateway.upstream.carriers.base import UNREACHED
from gateway.upstream.health import counts_against
from gateway.upstream.passthrough import HELD, Held, Watch

# Methods that only read: asked again after a failure, once.
READ_ONLY = frozenset(
    {
        Operation.PING,
        Operation.DISCOVER,
        Operation.TOOLS_LIST,
        Operation.RESOURCES_LIST,
        Operation.RESOURCES_TEMPLATES_LIST,
        Operation.RESOURCES_READ,
        Operation.PROMPTS_LIST,
        Operation.PROMPTS_GET,
        Operation.COMPLETE,
    }
)
NEVER_SENT = "never_sent"
READ_ONLY_METHOD = "read_only_method"
SAFE_TOOL = "safe_tool"
REASONS = (NEVER_SENT, READ_ONLY_METHOD, SAFE_TOOL)


def safe_tool(tool: dict[str, Any]) -> bool:
    """A listed tool that says running it twice does no harm."""
    annotations = tool.get("annotations")
    if not isinstance(annotations, dict):
        return False
    return annotations.get("readOnlyHint") is True or annotations.get("idempotentHint") is True


def eligible(call: Call, tool_is_safe: bool) -> bool:
    """Whether ``call`` could be sent again after it may have reached a server (the
    cheap test, made before the call: a call that cannot be is run as it is)."""
    if call.id is None or call.state is not None or call.answers:
        return False  # a notification, or a round of a call already under way
    return call.operation in READ_ONLY or (call.operation is Operation.TOOLS_CALL and tool_is_safe)


def send_again(call: Call, failure: Failure, *, tool_is_safe: bool, asked: bool) -> str | None:
    """Why ``call`` may be sent once more after ``failure`` (None: it may not)."""
    if failure.data == UNREACHED:
        return NEVER_SENT
    if asked or failure.kind is FailureKind.UPSTREAM_TIMEOUT or not counts_against(failure):
        return None
    if not eligible(call, tool_is_safe):
        return None
    return READ_ONLY_METHOD if call.operation in READ_ONLY else SAFE_TOOL


def watched(call: Call, exchange: Exchange, tool_is_safe: bool) -> AskWatch | None:
    """A watch on the call's questions where a failure could be sent again (None: it
    could not be, or nothing can be asked of this client, so nothing is watched)."""
    if exchange.ask is None or not eligible(call, tool_is_safe):
        return None
    return AskWatch(exchange)


class Sender(Protocol):
    """What sends a call once: a link, or one target of a route's several."""

    async def send_once(self, call: Call, exchange: Exchange) -> Outcome: ...

    def note_retry(self, call: Call, why: str) -> None: ...


async def once_more(call: Call, exchange: Exchange, tool_is_safe: bool, sender: Sender) -> Outcome:
    """Send the call; after a failure, once more where :func:`send_again` says so
    (the sender is told why)."""
    watch = watched(call, exchange, tool_is_safe)
    lane = lane_watch(exchange, call)  # what the pass-through lane asked, if it sent
    outcome = await sender.send_once(call, watch.exchange if watch is not None else exchange)
    if not isinstance(outcome, Failure):
        return outcome
    asked = (watch is not None and watch.asked) or (lane is not None and lane.asked)
    why = send_again(call, outcome, tool_is_safe=tool_is_safe, asked=asked)
    if why is None:
        return outcome
    sender.note_retry(call, why)
    return await sender.send_once(call, exchange)


def lane_watch(exchange: Exchange, call: Call) -> Watch | None:
    """The watch on what the pass-through lane asked while it sent ``call``."""
    held = exchange.extra.get(HELD) if exchange.extra else None
    return held.watch if isinstance(held, Held) and held.call is call else None


class AskWatch:
    """An exchange whose asks are noted: a call that asked its client anything is not
    run again (the client would be asked again)."""

    def __init__(self, exchange: Exchange) -> None:
        self.asked = False
        inner = exchange.ask
        assert inner is not None

        async def ask(question: Ask) -> Answer | None:
            self.asked = True
            return await inner(question)

        self.exchange = exchange.routed(ask, exchange.emit)
