"""A normalized request or notification from a client, revision-free."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from gateway.core.ask import Answer
from gateway.core.failure import Failure

RequestId = str | int


class Operation(Enum):
    """What a client message asks for.  Values are the wire method names."""

    INITIALIZE = "initialize"
    INITIALIZED = "notifications/initialized"
    PING = "ping"
    DISCOVER = "server/discover"
    TOOLS_LIST = "tools/list"
    TOOLS_CALL = "tools/call"
    RESOURCES_LIST = "resources/list"
    RESOURCES_TEMPLATES_LIST = "resources/templates/list"
    RESOURCES_READ = "resources/read"
    RESOURCES_SUBSCRIBE = "resources/subscribe"
    RESOURCES_UNSUBSCRIBE = "resources/unsubscribe"
    PROMPTS_LIST = "prompts/list"
    PROMPTS_GET = "prompts/get"
    COMPLETE = "completion/complete"
    SET_LOG_LEVEL = "logging/setLevel"
    LISTEN = "subscriptions/listen"
    TASKS_GET = "tasks/get"
    TASKS_RESULT = "tasks/result"
    TASKS_LIST = "tasks/list"
    TASKS_CANCEL = "tasks/cancel"
    TASKS_UPDATE = "tasks/update"
    CANCELLED = "notifications/cancelled"
    PROGRESS = "notifications/progress"
    ROOTS_LIST_CHANGED = "notifications/roots/list_changed"
    # A method no revision defines: forwarded as it is (extensions, vendor methods).
    OTHER = "*"

    # Members are equal only to themselves: hashed by identity (in C), not by Enum's
    # hash of the name (a Python call on every set and dict lookup).
    __hash__ = object.__hash__

    @classmethod
    def for_method(cls, method: object) -> Operation:
        return OPERATIONS.get(method, cls.OTHER) if isinstance(method, str) else cls.OTHER

    @property
    def is_notification(self) -> bool:
        return self in NOTIFICATIONS


# A method name's Operation (what decoding looks up: a dict, not a call per message).
OPERATIONS: dict[str, Operation] = {op.value: op for op in Operation if op is not Operation.OTHER}
NOTIFICATIONS = frozenset(op for op in Operation if op.value.startswith("notifications/"))


# Operations whose complete results may carry caching hints (ttlMs, cacheScope).
CACHEABLE = frozenset(
    {
        Operation.DISCOVER,
        Operation.TOOLS_LIST,
        Operation.RESOURCES_LIST,
        Operation.RESOURCES_TEMPLATES_LIST,
        Operation.RESOURCES_READ,
        Operation.PROMPTS_LIST,
    }
)
# Operations that may ask the client for input mid-call.
MAY_ASK = frozenset({Operation.TOOLS_CALL, Operation.PROMPTS_GET, Operation.RESOURCES_READ})
# List operations, paginated with cursor / nextCursor.
PAGINATED = {
    Operation.TOOLS_LIST: "tools",
    Operation.RESOURCES_LIST: "resources",
    Operation.RESOURCES_TEMPLATES_LIST: "resourceTemplates",
    Operation.PROMPTS_LIST: "prompts",
    Operation.TASKS_LIST: "tasks",
}


@dataclass(slots=True)
class ClientContext:
    """Who is asking, in which revision, declaring what.

    ``adapter`` is the revision's adapter that decoded the message, stamped on it
    once by that adapter and carried with the call from there: opaque here (the
    core knows no adapters); ``gateway.protocol.adapter_of`` reads it.
    """

    protocol_version: str
    capabilities: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] | None = None
    log_level: str | None = None
    adapter: object = None
    # The client asks for its tools to run as tasks (the tasks extension): decided
    # once, at decode, by its adapter.
    tasks: bool = False


@dataclass(slots=True)
class Call:
    """One decoded client message.

    ``params`` holds the operation's own parameters with the protocol plumbing
    lifted out: the per-request protocol keys of ``_meta``, ``inputResponses``
    and ``requestState`` (into ``answers`` / ``state``) and the progress token.
    What is left of ``_meta`` is in ``meta`` and passes through untouched.
    """

    id: RequestId | None
    operation: Operation
    method: str
    params: dict[str, Any]
    client: ClientContext
    meta: dict[str, Any] = field(default_factory=dict)
    progress_token: str | int | None = None
    answers: dict[str, Answer] | None = None
    state: str | None = None
    # A tools/call's `Mcp-Param-*` headers by lower-case name, which the forwarder
    # checks against the tool (None: its revision and transport mirror no arguments).
    param_headers: dict[str, str] | None = None

    # A notification is a Call without an id (JSON-RPC's own rule): ``call.id is None``.

    @property
    def name(self) -> str | None:
        """The tool or prompt name, or the resource URI, the call is about."""
        value = self.params.get("uri" if self.operation is Operation.RESOURCES_READ else "name")
        return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class ClientReply:
    """A client's response to a request the gateway pushed to it."""

    id: RequestId
    answer: Answer


@dataclass(frozen=True, slots=True)
class DecodeFailure:
    """A message that could not become a Call; keeps the id when there was one."""

    id: RequestId | None
    failure: Failure
    method: str | None = None
