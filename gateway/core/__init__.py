"""The normalized core: revision-free values every other layer speaks."""

from gateway.core.ask import ASK_KINDS, Answer, Ask, AskKind
from gateway.core.call import (
    CACHEABLE,
    MAY_ASK,
    NOTIFICATIONS,
    OPERATIONS,
    PAGINATED,
    Call,
    ClientContext,
    ClientReply,
    DecodeFailure,
    Operation,
    RequestId,
)
from gateway.core.catalog import (
    PromptSpec,
    ResourceSpec,
    ResourceTemplateSpec,
    ServerProfile,
    ToolSpec,
)
from gateway.core.exchange import Asker, Downstream, EventSink, Exchange, discard_event
from gateway.core.failure import Failure, FailureKind
from gateway.core.interest import Interest
from gateway.core.outcome import Event, InputRequired, Outcome, Value
from gateway.core.preamble import Preamble, SessionView
from gateway.core.task import Task

__all__ = [
    "ASK_KINDS",
    "CACHEABLE",
    "MAY_ASK",
    "NOTIFICATIONS",
    "OPERATIONS",
    "PAGINATED",
    "Answer",
    "Ask",
    "AskKind",
    "Asker",
    "Call",
    "ClientContext",
    "ClientReply",
    "DecodeFailure",
    "Downstream",
    "Event",
    "EventSink",
    "Exchange",
    "Failure",
    "FailureKind",
    "InputRequired",
    "Interest",
    "Operation",
    "Outcome",
    "Preamble",
    "PromptSpec",
    "RequestId",
    "ResourceSpec",
    "ResourceTemplateSpec",
    "ServerProfile",
    "SessionView",
    "Task",
    "ToolSpec",
    "Value",
    "discard_event",
]
