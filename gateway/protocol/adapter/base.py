"""The base of every adapter: what a revision is, as flags and tables, and how its
failures are said (error codes, HTTP statuses).

`AdapterBase` declares the facts each revision file sets; the roles build on it:
`projection.py` (what a client of the revision may see), `server.py` (the gateway
toward clients), `client.py` (the gateway toward upstreams).  Also here: the few
wire names and helpers both roles use.  Nothing here names a revision: the
tables in the revision files do.
"""

from __future__ import annotations

import base64
import binascii
import copy
import functools
from abc import ABC
from typing import TYPE_CHECKING, Any, ClassVar, Self, cast

from gateway.core import AskKind, ClientContext, Failure, FailureKind, Operation, SessionView

if TYPE_CHECKING:
    from gateway.protocol.adapter import Adapter

Message = dict[str, Any]

# The tasks extension's identifier, in client and server `extensions`.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

# The reserved tool arguments that carry answers and state on revisions whose
# asks travel in arguments (`asks_in_arguments`).
ANSWERS_ARGUMENT = "_mcp_answers"
STATE_ARGUMENT = "_mcp_state"
# Where such a tool result also says its questions and state for a program (the text
# says them for a model): the result's `_meta`, under the gateway's own prefix.
ASKED_META = "dev.mcp-gateway/asked"


def asked_in_result(result: Any) -> tuple[dict[str, Any], str] | None:
    """The questions ``{key: {"method", "params"}}`` and the state a tool result asks to
    have answered in arguments (None: it asks nothing)."""
    meta = result.get("_meta") if isinstance(result, dict) else None
    asked = meta.get(ASKED_META) if isinstance(meta, dict) else None
    if not isinstance(asked, dict):
        return None
    questions, state = asked.get("asks"), asked.get("state")
    if not isinstance(questions, dict) or not isinstance(state, str):
        return None
    return questions, state


def decode_header_value(value: str) -> str:
    """Undo the `=?base64?...?=` wrapping of Mcp-Name / Mcp-Param-* values."""
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return value
    return value


def encode_header_value(value: str) -> str:
    """Wrap a value that is not plain visible ASCII (or looks wrapped) in base64."""
    plain = value.isascii() and value.isprintable() and value == value.strip()
    if plain and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


class AdapterBase(ABC):
    """One MCP revision's facts: flags, tables, failure mapping (no per-request state)."""

    version: ClassVar[str]

    # Behavioural flags: everything above the adapters branches on these (and on
    # the derived `can_push_ask` and `carries_state` below).  `can_ask`: asks travel
    # in results (`input_required`); `asks_in_arguments`: what cannot be pushed
    # travels in reserved tool arguments and a tool result that says what is needed.
    can_ask: ClassVar[bool]
    asks_in_arguments: ClassVar[bool]
    has_handshake: ClassVar[bool]
    allows_batch: ClassVar[bool]
    # Handler state leaves the server and comes back on every revision that cannot
    # push every ask: `can_ask` or `asks_in_arguments` (as the seed says).  Derived
    # once per class (below), so the flags cannot disagree and nothing is computed
    # per call.
    carries_state: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.carries_state = bool(
            getattr(cls, "can_ask", False) or getattr(cls, "asks_in_arguments", False)
        )

    # What the revision defines, as tables; subclasses extend or trim them.
    methods: ClassVar[frozenset[Operation]]
    server_notifications: ClassVar[frozenset[str]]
    ask_kinds: ClassVar[frozenset[AskKind]]
    # Asks this revision's clients can take as server-initiated requests.
    pushable_asks: ClassVar[frozenset[AskKind]]
    tool_fields: ClassVar[frozenset[str]]
    resource_fields: ClassVar[frozenset[str]]
    template_fields: ClassVar[frozenset[str]]
    prompt_fields: ClassVar[frozenset[str]]
    implementation_fields: ClassVar[frozenset[str]]
    content_types: ClassVar[frozenset[str]]
    server_capabilities: ClassVar[frozenset[str]]
    client_capabilities: ClassVar[frozenset[str]]
    result_fields: ClassVar[frozenset[str]]
    content_meta: ClassVar[bool]  # `_meta` and annotations.lastModified on blocks
    structured_content: ClassVar[str]  # "none", "object" or "any"
    progress_message: ClassVar[bool]
    # Task-only tools are offered (the client runs tasks through the tasks extension):
    # set on the `task_clients` view of an adapter, never on a revision class.
    offers_task_tools: bool = False
    # HTTP transport facts.
    session_header: ClassVar[str | None] = "mcp-session-id"
    version_header: ClassVar[bool] = False
    transports: ClassVar[frozenset[str]] = frozenset({"http", "sse", "stdio"})
    # Streamable HTTP SSE streams carry event ids and resume after `Last-Event-ID`;
    # `primes_streams`: each opens with a priming event (an id, empty data, `retry`).
    resumable_streams: ClassVar[bool] = False
    primes_streams: ClassVar[bool] = False
    # Streamable HTTP requests of this revision mirror annotated tool arguments
    # into `Mcp-Param-*` headers (the server checks them against the tool).
    mirrors_params: ClassVar[bool] = False
    # Operations whose request and answer may pass as the upstream of the same
    # revision sends them (the pass-through lane; see ``verbatim_result``).
    verbatim_operations: ClassVar[frozenset[Operation]] = frozenset()

    codes: ClassVar[dict[FailureKind, int]]
    statuses: ClassVar[dict[FailureKind, int]]
    # Error codes only servers of this revision's era send (era evidence in a probe).
    era_refusal_codes: ClassVar[frozenset[int]] = frozenset()

    # ------------------------------------------------------------------ flags

    @property
    def can_push_ask(self) -> bool:
        """Servers of this revision may put asks to clients as server-initiated
        requests (the kinds `pushable_asks` lists).

        Derived, so the flag and the table cannot disagree.  The seed's table says
        False for 2024-11-05 and 2025-03-26; their specifications do define
        `sampling/createMessage` and `roots/list` as server requests (schema
        `ServerRequest`, client/sampling.mdx, client/roots.mdx), so here it is True
        for them: they push those two and carry elicitation in arguments.
        """
        return bool(self.pushable_asks)

    @classmethod
    def named_version(cls, message: dict[str, Any]) -> str | None:
        """The revision a message names for itself, on revisions whose every request
        says it (no negotiation); None where this revision's messages say nothing.
        How selection recognises such a message, whatever revision it names."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.version}>"

    @functools.cached_property
    def task_clients(self) -> Self:
        """This same adapter toward clients whose tasks the gateway runs: task-only
        tools are offered.  A copy of this instance, so a subclass (a later
        revision) keeps every projection of its own for those clients too."""
        view = copy.copy(self)
        view.offers_task_tools = True
        return view

    # ------------------------------------------------------ failure mapping

    def error_code(self, failure: Failure) -> int:
        if failure.kind is FailureKind.UPSTREAM_ERROR and failure.code is not None:
            return self.translate_code(failure.code)
        return self.codes.get(failure.kind, -32603)

    def translate_code(self, code: int) -> int:
        """An upstream's pass-through code, as this revision may say it."""
        return code

    def http_status(self, failure: Failure) -> int:
        return self.statuses.get(failure.kind, 200)


def adapter_of(client: ClientContext | SessionView) -> Adapter | None:
    """The adapter that decoded the client's message, or that the session negotiated
    (None: the call was made up inside the gateway, not decoded from a client).  Every
    adapter is an :class:`AdapterBase` combined with both roles (``Adapter``)."""
    adapter = client.adapter
    return cast("Adapter", adapter) if isinstance(adapter, AdapterBase) else None
