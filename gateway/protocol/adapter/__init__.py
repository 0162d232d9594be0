"""The Adapter ABC: one instance per revision, shared, holding no per-request state.

The flags, tables and failure mapping are in `base.py`, projection (what a client
of a revision may see) in `projection.py`; this file still holds both roles: the
server role (the shared decode pipeline, encoding, header rules) and the client
role (`client_*`).  Each revision file sets the tables and overrides the hooks
that differ.  Nothing here names a revision: the tables in the revision files do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from gateway.core import (
    Answer,
    Ask,
    AskKind,
    Call,
    ClientContext,
    ClientReply,
    DecodeFailure,
    Event,
    Failure,
    FailureKind,
    InputRequired,
    Interest,
    Operation,
    Outcome,
    Preamble,
    ServerProfile,
    Task,
    Value,
)
from gateway.core import jsonrpc as rpc
from gateway.protocol import models
from gateway.protocol.adapter.base import (
    ANSWERS_ARGUMENT,
    STATE_ARGUMENT,
    TASKS_EXTENSION,
    AdapterBase,
    Message,
    decode_header_value,
    encode_header_value,
)
from gateway.protocol.adapter.projection import KNOWN_CLIENT_CAPABILITIES, Projection, keep

__all__ = [
    "ANSWERS_ARGUMENT",
    "LIST_CHANGES",
    "STATE_ARGUMENT",
    "TASKS_EXTENSION",
    "Adapter",
    "AdapterBase",
    "Decoded",
    "Message",
    "Projection",
    "declares_tasks_extension",
    "decode_header_value",
    "encode_header_value",
    "runs_tool_tasks",
]

Decoded = Call | ClientReply | DecodeFailure

# A task's fields in the tasks extension (wire name -> the core Task's fact): the
# facts of core tasks (below), two lifetimes renamed.
EXTENSION_TASK_FIELDS = {
    "status": "status",
    "statusMessage": "status_message",
    "createdAt": "created_at",
    "lastUpdatedAt": "last_updated_at",
    "ttlMs": "ttl_ms",
    "pollIntervalMs": "poll_interval_ms",
}

# What a client may do with an elicitation (every revision that has them).
ELICIT_ACTIONS = frozenset({"accept", "decline", "cancel"})

_PARAMS_MODELS: dict[Operation, type[models.Params]] = {
    Operation.INITIALIZE: models.InitializeParams,
    Operation.TOOLS_LIST: models.PaginatedParams,
    Operation.RESOURCES_LIST: models.PaginatedParams,
    Operation.RESOURCES_TEMPLATES_LIST: models.PaginatedParams,
    Operation.PROMPTS_LIST: models.PaginatedParams,
    Operation.TASKS_LIST: models.PaginatedParams,
    Operation.TOOLS_CALL: models.CallToolParams,
    Operation.RESOURCES_READ: models.ReadResourceParams,
    Operation.RESOURCES_SUBSCRIBE: models.SubscribeParams,
    Operation.RESOURCES_UNSUBSCRIBE: models.SubscribeParams,
    Operation.PROMPTS_GET: models.GetPromptParams,
    Operation.COMPLETE: models.CompleteParams,
    Operation.SET_LOG_LEVEL: models.SetLevelParams,
    Operation.CANCELLED: models.CancelledParams,
    Operation.PROGRESS: models.ProgressParams,
    Operation.TASKS_GET: models.TaskParams,
    Operation.TASKS_RESULT: models.TaskParams,
    Operation.TASKS_CANCEL: models.TaskParams,
    Operation.LISTEN: models.ListenParams,
}


def declares_tasks_extension(capabilities: dict[str, Any]) -> bool:
    """Whether client capabilities declare the tasks extension."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def _plainly_valid(operation: Operation, params: dict[str, Any]) -> bool:
    """The usual ``tools/call`` params, seen valid as its model would find them without
    building the model; anything else (and any doubt) goes to the model, which words
    the error."""
    if operation is not Operation.TOOLS_CALL or "meta" in params:
        return False  # "meta" too: the model reads it as `_meta` (populate_by_name)
    arguments = params.get("arguments")
    meta = params.get("_meta")
    return (
        type(params.get("name")) is str
        and (arguments is None or type(arguments) is dict)
        and (meta is None or type(meta) is dict)
    )


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:3]:
        where = ".".join(str(p) for p in error["loc"]) or "params"
        parts.append(f"{where}: {error['msg']}")
    return "Invalid params: " + "; ".join(parts)


def _merge_capabilities(asks: Iterable[Ask]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for ask in asks:
        for key, value in ask.capability().items():
            merged.setdefault(key, {}).update(value)
    return merged


# A task's fields in core tasks (wire name -> the core Task's fact); the tasks
# extension says the same facts with two lifetimes renamed (above).
CORE_TASK_FIELDS = {
    "status": "status",
    "statusMessage": "status_message",
    "createdAt": "created_at",
    "lastUpdatedAt": "last_updated_at",
    "ttl": "ttl_ms",
    "pollInterval": "poll_interval_ms",
}

# Server capability -> the list_changed notification its `listChanged` promises.
LIST_CHANGES = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}


def runs_tool_tasks(server_capabilities: dict[str, Any]) -> bool:
    """Whether an upstream declares core tasks for `tools/call` (`tasks.requests.tools.call`)."""
    tasks = server_capabilities.get("tasks")
    requests = tasks.get("requests") if isinstance(tasks, dict) else None
    tools = requests.get("tools") if isinstance(requests, dict) else None
    return isinstance(tools, dict) and isinstance(tools.get("call"), dict)


def _declares(capabilities: dict[str, Any], capability: str, flag: str) -> bool:
    entry = capabilities.get(capability)
    return isinstance(entry, dict) and entry.get(flag) is True


class Adapter(Projection):
    """One MCP revision, in both roles: server (toward clients), client (toward upstreams)."""

    # ---- decode

    def decode(self, preamble: Preamble) -> list[Decoded]:
        """One inbound body into Calls, client replies, or failures that keep the id."""
        if preamble.parse_error is not None:
            return [DecodeFailure(None, Failure(FailureKind.PARSE_ERROR, preamble.parse_error))]
        body = preamble.body
        if isinstance(body, list):
            if not self.allows_batch:
                return [
                    DecodeFailure(
                        None,
                        Failure(
                            FailureKind.INVALID_REQUEST,
                            "JSON-RPC batches are not part of this protocol revision",
                        ),
                    )
                ]
            if not body:
                return [DecodeFailure(None, Failure(FailureKind.INVALID_REQUEST, "empty batch"))]
            decoded = [self.decode_message(item, preamble) for item in body]
            if any(isinstance(r, Call) and r.operation is Operation.INITIALIZE for r in decoded):
                # The whole batch is refused, and every request in it is told so.
                failure = Failure(
                    FailureKind.INVALID_REQUEST, "initialize must not be part of a batch"
                )
                return [
                    DecodeFailure(r.id, failure, r.method)
                    for r in decoded
                    if isinstance(r, Call | DecodeFailure) and r.id is not None
                ]
            return decoded
        return [self.decode_message(body, preamble)]

    def decode_message(self, message: Any, preamble: Preamble) -> Decoded:
        """The shared pipeline for one message; the hooks are per revision."""
        failure = self.check_message(message)
        raw_id = message.get("id") if isinstance(message, dict) else None
        id_ = raw_id if rpc.valid_id(raw_id) else None
        if failure is not None:
            named = message.get("method") if isinstance(message, dict) else None
            return DecodeFailure(id_, failure, named if isinstance(named, str) else None)
        assert isinstance(message, dict)
        if "method" not in message:
            return ClientReply(message["id"], Answer.from_response(message))
        method = str(message["method"])
        operation = Operation.for_method(method)
        if operation is not Operation.OTHER and operation not in self.methods:
            return DecodeFailure(
                id_,
                Failure(FailureKind.UNKNOWN_METHOD, f"Method not found: {method}"),
                method,
            )
        if operation.is_notification != ("id" not in message) and operation is not Operation.OTHER:
            kind = "a notification" if operation.is_notification else "a request"
            return DecodeFailure(
                id_, Failure(FailureKind.INVALID_REQUEST, f"{method} must be {kind}"), method
            )
        params: dict[str, Any] = message.get("params") or {}
        model = self.params_model(operation)
        if model is not None and not _plainly_valid(operation, params):
            try:
                model.model_validate(params)
            except ValidationError as exc:
                return DecodeFailure(
                    id_,
                    Failure(FailureKind.INVALID_PARAMS, _describe(exc), {"method": method}),
                    method,
                )
        failure = self.check_params(operation, params, preamble)
        if failure is not None:
            return DecodeFailure(id_, failure, method)
        client = self.client_info_for(operation, params, preamble)
        params, answers, state = self.answers_for(operation, params)
        params, meta, progress_token = self.actions_for(operation, params)
        return self.build_call(
            id_, operation, method, params, client, meta, progress_token, answers, state
        )

    # ---- pipeline hooks

    def check_message(self, message: Any) -> Failure | None:
        """JSON-RPC structure: an object, version 2.0, a valid id and method."""
        if not isinstance(message, dict):
            return Failure(FailureKind.INVALID_REQUEST, "a JSON-RPC message must be an object")
        if message.get("jsonrpc") != "2.0":
            return Failure(FailureKind.INVALID_REQUEST, 'jsonrpc must be "2.0"')
        if "id" in message and not rpc.valid_id(message["id"]):
            return Failure(FailureKind.INVALID_REQUEST, "id must be a string or an integer")
        if "method" in message:
            if not isinstance(message["method"], str) or not message["method"]:
                return Failure(FailureKind.INVALID_REQUEST, "method must be a non-empty string")
            params = message.get("params")
            if params is not None and not isinstance(params, dict):
                return Failure(FailureKind.INVALID_REQUEST, "params must be an object")
            if params is not None and "_meta" in params and not isinstance(params["_meta"], dict):
                return Failure(FailureKind.INVALID_PARAMS, "_meta must be an object")
            return None
        if "id" not in message:
            return Failure(FailureKind.INVALID_REQUEST, "a message needs a method or an id")
        if ("result" in message) == ("error" in message):
            return Failure(FailureKind.INVALID_REQUEST, "a response has a result or an error")
        return None

    def params_model(self, operation: Operation) -> type[BaseModel] | None:
        return _PARAMS_MODELS.get(operation)

    def check_params(
        self, operation: Operation, params: dict[str, Any], preamble: Preamble
    ) -> Failure | None:
        return None

    def client_info_for(
        self, operation: Operation, params: dict[str, Any], preamble: Preamble
    ) -> ClientContext:
        """Handshake revisions: the session remembers; initialize says it itself."""
        if operation is Operation.INITIALIZE:
            return ClientContext(
                protocol_version=self.version,
                capabilities=self.effective_capabilities(dict(params.get("capabilities") or {})),
                info=params.get("clientInfo"),
            )
        session = preamble.session
        if session is None:
            return ClientContext(
                protocol_version=self.version, capabilities=self.effective_capabilities({})
            )
        return ClientContext(
            protocol_version=session.protocol_version,
            capabilities=session.capabilities,
            info=session.info,
            log_level=session.log_level,
        )

    def effective_capabilities(self, declared: dict[str, Any]) -> dict[str, Any]:
        """What the client can answer through this revision, declared or not.

        Where asks travel in tool arguments, form elicitation reaches the model
        through the tool result even though the revision has no word for it.
        """
        if self.asks_in_arguments and "elicitation" not in declared:
            return {**declared, "elicitation": {"form": {}}}
        return declared

    def answers_for(
        self, operation: Operation, params: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Answer] | None, str | None]:
        """Lift answers and state out of the params.

        Revisions that carry asks in arguments get them back in the reserved
        tool arguments; they never reach the upstream.
        """
        arguments = params.get("arguments")
        if (
            not self.asks_in_arguments
            or operation is not Operation.TOOLS_CALL
            or not isinstance(arguments, dict)
            or (ANSWERS_ARGUMENT not in arguments and STATE_ARGUMENT not in arguments)
        ):
            return params, None, None
        arguments = dict(arguments)
        raw = arguments.pop(ANSWERS_ARGUMENT, None)
        state = arguments.pop(STATE_ARGUMENT, None)
        answers = None
        if isinstance(raw, dict):
            answers = {
                str(key): Answer(
                    result=value
                    if isinstance(value, dict) and "action" in value
                    else {"action": "accept", "content": value}
                )
                for key, value in raw.items()
            }
        return (
            {**params, "arguments": arguments},
            answers,
            state if isinstance(state, str) else None,
        )

    def check_answer(self, ask: Ask, answer: Answer) -> str | None:
        """Why ``answer`` is no answer to ``ask`` (None: it is one).  A client's error
        is always an answer; a result must have the shape the ask's method returns."""
        if answer.error is not None:
            return None
        result = answer.result or {}
        if ask.kind is AskKind.ELICIT:
            if result.get("action") not in ELICIT_ACTIONS:
                return "an elicitation answer needs action accept, decline or cancel"
            content = result.get("content")
            if content is not None and not isinstance(content, dict):
                return "an elicitation answer's content must be an object"
        elif ask.kind is AskKind.SAMPLE:
            if not isinstance(result.get("role"), str) or "content" not in result:
                return "a sampling answer needs role and content"
        elif not isinstance(result.get("roots"), list):
            return "a roots answer needs a roots list"
        return None

    def actions_for(
        self, operation: Operation, params: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any], str | int | None]:
        """Split `_meta` off the params; take the progress token out of it."""
        if "_meta" not in params:
            return params, {}, None
        params = dict(params)
        meta = dict(params.pop("_meta") or {})
        token = meta.pop("progressToken", None)
        return params, meta, token if rpc.valid_id(token) else None

    def build_call(
        self,
        id_: Any,
        operation: Operation,
        method: str,
        params: dict[str, Any],
        client: ClientContext,
        meta: dict[str, Any],
        progress_token: str | int | None,
        answers: dict[str, Answer] | None,
        state: str | None,
    ) -> Call:
        return Call(
            id=id_,
            operation=operation,
            method=method,
            params=params,
            client=client,
            meta=meta,
            progress_token=progress_token,
            answers=answers,
            state=state,
        )

    # ---- encode

    def encode(self, call: Call, profile: ServerProfile, outcome: Outcome) -> Message | None:
        """The final response to a call, identical for JSON, SSE and stdio."""
        if call.id is None:
            return None
        if isinstance(outcome, Value):
            return self.encode_value(call, profile, outcome)
        if isinstance(outcome, InputRequired):
            return self.encode_input_required(call, profile, outcome)
        return self.encode_failure(call.id, outcome, call.operation)

    def encode_value(self, call: Call, profile: ServerProfile, value: Value) -> Message:
        return rpc.result(call.id, self.project_result(call.operation, value.result, profile))

    def encode_input_required(
        self, call: Call, profile: ServerProfile, outcome: InputRequired
    ) -> Message:
        """Revisions that cannot carry input_required say what is needed in a tool result."""
        if self.asks_in_arguments and call.operation is Operation.TOOLS_CALL:
            return rpc.result(call.id, self.ask_result(outcome))
        asks = ", ".join(ask.method for ask in outcome.asks.values()) or "input"
        failure = Failure(
            FailureKind.MISSING_CAPABILITY,
            f"The server needs {asks}, which this client cannot provide",
            {"requiredCapabilities": _merge_capabilities(outcome.asks.values())},
        )
        return self.encode_failure(call.id, failure, call.operation)

    def ask_result(self, outcome: InputRequired) -> dict[str, Any]:
        """A tool result asking the model to call again with answers in arguments."""
        lines = ["This tool needs more input before it can finish."]
        for key, ask in outcome.asks.items():
            message = ask.params.get("message") or ask.method
            lines.append(f"- `{key}` ({ask.method}): {message}")
            schema = ask.params.get("requestedSchema")
            if schema is not None:
                lines.append(f"  answer schema: {orjson.dumps(schema).decode()}")
        lines.append(
            f"Call the tool again with the same arguments plus `{ANSWERS_ARGUMENT}` "
            '(an object mapping each key above to {"action": "accept", "content": {...}} '
            f'or {{"action": "decline"}}) and `{STATE_ARGUMENT}` set to the value below.'
        )
        lines.append(f"{STATE_ARGUMENT}: {outcome.state or ''}")
        return {"content": [{"type": "text", "text": "\n".join(lines)}], "isError": False}

    def encode_failure(
        self, id_: Any, failure: Failure, operation: Operation | None = None
    ) -> Message:
        if failure.kind is FailureKind.INVALID_ARGUMENTS and operation is Operation.TOOLS_CALL:
            # Argument failures are results: the model asked, and deserves to be told.
            text = {"type": "text", "text": failure.message}
            return rpc.result(id_, self.project_result_fields({"content": [text], "isError": True}))
        data = failure.data
        if failure.kind is FailureKind.UNSUPPORTED_VERSION and isinstance(data, dict):
            data = {"supported": data.get("supported", []), "requested": data.get("requested")}
        return rpc.error(id_, self.error_code(failure), failure.message, data)

    # ---- notifications and pushed asks toward the client

    def encode_event(self, event: Event, listen_id: Any = None) -> Message | None:
        """A server notification for this revision's client, or None if it has no form."""
        if event.method not in self.server_notifications:
            return None
        params = dict(event.params)
        if event.method == "notifications/progress" and not self.progress_message:
            params.pop("message", None)
        return rpc.notification(event.method, params)

    def encode_ask(self, ask: Ask, request_id: Any) -> Message | None:
        """A server-initiated request carrying an ask, if this revision's clients take it."""
        if ask.kind not in self.pushable_asks:
            return None
        return rpc.request(request_id, ask.method, self.project_ask_params(ask))

    def project_ask_params(self, ask: Ask) -> dict[str, Any]:
        return dict(ask.params)

    def refuse_ask(self, ask: Ask) -> Answer | None:
        """The answer for the server when this revision cannot put ``ask`` to its
        clients at all (None: it can, as `project_ask_params` projects it)."""
        return None

    # ---- listens of clients (on revisions that have them)

    def listen_interest(self, params: dict[str, Any]) -> Interest:
        """What a client's listen asks for (nothing, where listens do not exist)."""
        return Interest()

    def listen_acknowledgement(self, honoured: Interest) -> Event:
        """The event telling a listening client what is honoured."""
        raise Failure(FailureKind.UNKNOWN_METHOD, "listening is not part of this revision")

    # ---- tasks toward clients of the tasks extension (the gateway runs them)

    def runs_client_tasks(self, capabilities: dict[str, Any]) -> bool:
        """Whether a client's capabilities ask for its tools to run as tasks."""
        return declares_tasks_extension(capabilities)

    def task_id(self, params: dict[str, Any]) -> Any:
        """The task a client's tasks request is about (as the client sent it)."""
        return params.get("taskId")

    def task_result(self, task: Task) -> dict[str, Any]:
        """A `tools/call` the gateway runs as a task: the created task."""
        return {"resultType": "task", **self._task_fields(task)}

    def detailed_task_result(
        self, task: Task, outcome: Outcome | None, requests: dict[str, Ask]
    ) -> dict[str, Any]:
        """A task with its outcome once terminal and the asks it waits on: a tool
        error result is a completed task here, not a failed one."""
        out = self._task_fields(task)
        if isinstance(outcome, Value):
            if out.get("status") == "failed" and outcome.result.get("isError") is True:
                out["status"] = "completed"
            out["result"] = outcome.result
        elif isinstance(outcome, Failure):
            error: dict[str, Any] = {
                "code": outcome.code if outcome.code is not None else -32603,
                "message": outcome.message,
            }
            if outcome.data is not None:
                error["data"] = outcome.data
            out["error"] = error
        if requests:
            out["inputRequests"] = {
                key: {"method": ask.method, "params": dict(ask.params)}
                for key, ask in requests.items()
            }
        return {"resultType": "complete", **out}

    def _task_fields(self, task: Task) -> dict[str, Any]:
        out: dict[str, Any] = {"taskId": task.id}
        for wire, fact in EXTENSION_TASK_FIELDS.items():
            if fact in task.facts:
                out[wire] = task.facts[fact]
        return out

    # ---- transport rules

    def check_http(self, preamble: Preamble) -> Failure | None:
        """The headers a Streamable HTTP POST of this revision must carry."""
        if preamble.http_method != "POST":
            return None
        content_type = (preamble.header("content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return Failure(
                FailureKind.UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json"
            )
        if preamble.transport == "http":
            accept = (preamble.header("accept") or "").lower()
            wildcard = "*/*" in accept
            if not wildcard and (
                "application/json" not in accept or "text/event-stream" not in accept
            ):
                return Failure(
                    FailureKind.NOT_ACCEPTABLE,
                    "Accept must list both application/json and text/event-stream",
                )
        return None

    def check_param_headers(
        self, tool: dict[str, Any], arguments: Any, preamble: Preamble
    ) -> Failure | None:
        """A tools/call's `Mcp-Param-*` headers against the called tool's declared
        header parameters and the body's arguments: none before the stateless era."""
        return None

    # ---- the handshake, answered by the gateway itself

    def discover_result(
        self, profile: ServerProfile, supported: list[str], *, tasks: bool = False
    ) -> dict[str, Any]:
        """Discovery, on revisions that have it (``tasks``: the gateway runs tasks)."""
        raise Failure(FailureKind.UNKNOWN_METHOD, "discovery is not part of this revision")

    def initialize_result(self, profile: ServerProfile, protocol_version: str) -> dict[str, Any]:
        result: dict[str, Any] = {
            "protocolVersion": protocol_version,
            "capabilities": self.capabilities(profile.capabilities),
            "serverInfo": self.describe_implementation(profile.info),
        }
        if profile.instructions:
            result["instructions"] = profile.instructions
        return result

    # ================================================================ client

    def client_headers(
        self, call: Call | None, session_id: str | None, message: Message | None = None
    ) -> dict[str, str]:
        """HTTP headers for an upstream request (``message`` when there is no Call)."""
        headers = {"Accept": "application/json, text/event-stream"}
        if session_id and self.session_header:
            headers["Mcp-Session-Id"] = session_id
        if self.version_header and (session_id is not None or call is not None):
            headers["MCP-Protocol-Version"] = self.version
        return headers

    def client_handshake_params(
        self, info: dict[str, Any], capabilities: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "protocolVersion": self.version,
            "capabilities": self.client_project_capabilities(capabilities),
            "clientInfo": self.describe_implementation(info),
        }

    def client_param_paths(self, tool: dict[str, Any]) -> dict[tuple[str, ...], str] | None:
        """Tool parameters mirrored into HTTP headers: none before the stateless era."""
        return {}

    def client_param_headers(
        self, paths: dict[tuple[str, ...], str], arguments: dict[str, Any]
    ) -> dict[str, str]:
        return {}

    def client_opening(
        self, request_id: Any, info: dict[str, Any], capabilities: dict[str, Any]
    ) -> Message:
        """The first request a client of this revision sends to a server."""
        return rpc.request(
            request_id, "initialize", self.client_handshake_params(info, capabilities)
        )

    def client_project_capabilities(self, capabilities: dict[str, Any]) -> dict[str, Any]:
        projected = keep(capabilities, KNOWN_CLIENT_CAPABILITIES, self.client_capabilities)
        if "elicitation" in projected and AskKind.ELICIT not in self.ask_kinds:
            projected.pop("elicitation")
        return projected

    def client_decorate_params(self, call: Call, params: dict[str, Any]) -> dict[str, Any]:
        """Handshake revisions: the session carries who we are; only _meta pass-through."""
        return params

    def client_request(self, call: Call, request_id: Any) -> Message:
        """The upstream request for a call, in this revision."""
        params = self.client_project_params(call)
        meta = dict(call.meta)
        if call.progress_token is not None:
            meta["progressToken"] = call.progress_token
        if meta:
            params["_meta"] = meta
        params = self.client_decorate_params(call, params)
        return rpc.request(request_id, call.method, params)

    def client_notification(self, call: Call) -> Message:
        """A client notification (no answer expected) for the upstream, in this revision."""
        message = self.client_request(call, 0)
        del message["id"]
        return message

    def client_project_params(self, call: Call) -> dict[str, Any]:
        """The call's params as this revision's servers understand them."""
        params = dict(call.params)
        if call.operation is Operation.COMPLETE and "context" in params and not self.content_meta:
            params.pop("context")
        return params

    def client_input_requests(self, message: Message) -> dict[str, Ask]:
        """Asks in an upstream message: a server-initiated request (by its id)."""
        if rpc.is_request(message):
            kind = AskKind.for_method(message["method"])
            params = message.get("params")
            if kind is not None:
                return {
                    str(message["id"]): Ask(kind, dict(params) if isinstance(params, dict) else {})
                }
        return {}

    def client_read_response(self, call: Call, message: Message) -> Outcome:
        """An upstream response to a call, as an Outcome."""
        if "error" in message:
            return self.client_read_failure(message.get("error"))
        result = message.get("result")
        if not isinstance(result, dict):
            return Failure(FailureKind.UPSTREAM_PROTOCOL, "the upstream answered without a result")
        return Value(result)

    def client_read_failure(self, error: Any) -> Failure:
        if not isinstance(error, dict) or not isinstance(error.get("code"), int):
            return Failure(FailureKind.UPSTREAM_PROTOCOL, "the upstream sent a malformed error")
        code: int = error["code"]
        message = str(error.get("message", ""))
        data = error.get("data")
        kind = self.client_error_kinds.get(code)
        if kind is None:
            return Failure(FailureKind.UPSTREAM_ERROR, message, data, code=code)
        return Failure(kind, message, data)

    def client_names_lost_session(self, message: Any) -> bool:
        """Whether an HTTP 400 answer to a request that carried a session id says the
        server does not know that session.  The spec asks for 404, but servers built
        on the TypeScript SDK's example code (server-everything among them) answer
        400 "Bad Request: No valid session ID provided" after a restart."""
        error = message.get("error") if isinstance(message, dict) else None
        if not isinstance(error, dict):
            return False
        text = str(error.get("message", "")).lower()
        return "session" in text and error.get("code") in (-32000, -32001)

    def client_is_modern_refusal(self, error: Any) -> bool:
        """Whether an error answering this revision's opening request (the era probe)
        is one only a server of this revision's era sends: era evidence, though a
        refusal.  Other codes (or none) say nothing about the era."""
        code = error.get("code") if isinstance(error, dict) else None
        return isinstance(code, int) and code in self.era_refusal_codes

    def client_offered_versions(self, error: Any) -> list[str]:
        """The revisions an "unsupported version" refusal offers instead (none when
        the error is something else)."""
        if not isinstance(error, dict) or not self.client_is_modern_refusal(error):
            return []
        if error.get("code") != self.codes.get(FailureKind.UNSUPPORTED_VERSION):
            return []
        data = error.get("data")
        offered = data.get("supported") if isinstance(data, dict) else None
        return [v for v in offered if isinstance(v, str)] if isinstance(offered, list) else []

    @property
    def client_error_kinds(self) -> dict[int, FailureKind]:
        """How an upstream of this revision's codes read as failure kinds."""
        table: dict[int, FailureKind] = {}
        for kind in (
            FailureKind.PARSE_ERROR,
            FailureKind.INVALID_REQUEST,
            FailureKind.UNKNOWN_METHOD,
            FailureKind.INVALID_PARAMS,
            FailureKind.INTERNAL,
            FailureKind.RESOURCE_NOT_FOUND,
            FailureKind.MISSING_CAPABILITY,
            FailureKind.UNSUPPORTED_VERSION,
            FailureKind.HEADER_MISMATCH,
            FailureKind.URL_ELICITATION_REQUIRED,
            FailureKind.SAMPLING_REJECTED,
        ):
            code = self.codes.get(kind)
            if code is not None and code not in table:
                table[code] = kind
        return table

    def client_answer(self, ask_id: Any, answer: Answer) -> Message:
        """The response to an upstream's server-initiated request."""
        if answer.error is not None:
            error = answer.error
            return rpc.error(
                ask_id,
                int(error.get("code", -32603)),
                str(error.get("message", "")),
                error.get("data"),
            )
        return rpc.result(ask_id, answer.result or {})

    def client_read_profile(self, result: dict[str, Any]) -> ServerProfile:
        """An initialize result as a ServerProfile."""
        return ServerProfile(
            info=result.get("serverInfo") or {"name": "upstream", "version": "0"},
            capabilities=result.get("capabilities") or {},
            instructions=result.get("instructions"),
            versions=(str(result.get("protocolVersion", self.version)),),
            ask_kinds=tuple(kind.value for kind in self.ask_kinds),
        )

    # ---- change notifications an upstream offers

    def client_list_changes(self, capabilities: dict[str, Any]) -> frozenset[str]:
        """The list_changed notifications an upstream's capabilities promise."""
        return frozenset(
            method
            for capability, method in LIST_CHANGES.items()
            if _declares(capabilities, capability, "listChanged")
        )

    def client_can_subscribe(self, capabilities: dict[str, Any]) -> bool:
        """Whether an upstream takes subscriptions to resource updates."""
        return _declares(capabilities, "resources", "subscribe")

    # ---- listens toward an upstream (on revisions that have them)

    def client_listen_params(self, wanted: Interest) -> dict[str, Any]:
        """The params of an upstream listen for ``wanted``."""
        raise Failure(FailureKind.UNKNOWN_METHOD, "listening is not part of this revision")

    def client_read_acknowledgement(self, event: Event) -> Interest | None:
        """What an upstream listen honours, if ``event`` is its acknowledgement."""
        return None

    # ---- tasks of an upstream's own (core tasks: `task` on the request)

    def client_runs_tool_tasks(self, capabilities: dict[str, Any]) -> bool:
        """Whether an upstream's capabilities offer `tools/call` as tasks."""
        return runs_tool_tasks(capabilities)

    def client_as_task(self, params: dict[str, Any]) -> dict[str, Any]:
        """A request's params, asking the upstream to run it as a task."""
        return {**params, "task": {}}

    def client_task_params(self, task_id: Any) -> dict[str, Any]:
        """The params of the upstream's tasks requests about one task."""
        return {"taskId": task_id}

    def client_read_task(self, result: dict[str, Any]) -> Task | None:
        """A task (the result of the upstream's `tasks/get`), or None if it is not one."""
        task_id = result.get("taskId")
        if not isinstance(task_id, str):
            return None
        facts = {fact: result[wire] for wire, fact in CORE_TASK_FIELDS.items() if wire in result}
        return Task(task_id, facts)

    def client_read_created_task(self, result: dict[str, Any]) -> Task | None:
        """The task a task-run request created, or None when the upstream answered
        at once (no task)."""
        task = result.get("task")
        return self.client_read_task(task) if isinstance(task, dict) else None

    def client_read_event(self, message: Message) -> Event | None:
        if rpc.is_notification(message):
            params = message.get("params")
            return Event(message["method"], params if isinstance(params, dict) else {})
        return None
