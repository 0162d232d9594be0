"""The server role: the gateway toward clients, speaking the client's revision.

Decoding (one shared pipeline with per-revision hooks: structure, params,
client context, answers and state, `_meta`), encoding outcomes, events and
pushed asks, tasks the gateway runs for clients, the HTTP header rules a
request must meet, and the handshake the gateway answers itself.  (`client_info_for`
is a decode hook: it reads the calling client, so it lives here, not in client.py.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from gateway.core import (
    NOTIFICATIONS,
    OPERATIONS,
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
    ASKED_META,
    STATE_ARGUMENT,
    TASKS_EXTENSION,
    Message,
)
from gateway.protocol.adapter.projection import Projection

Decoded = Call | ClientReply | DecodeFailure

# A task's fields in the tasks extension (wire name -> the core Task's fact): the
# facts of core tasks (client.py), two lifetimes renamed.
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


class AdapterServerRole(Projection):
    """One MCP revision as the gateway speaks it to clients (the server role)."""

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
        operation = OPERATIONS.get(method, Operation.OTHER)
        if operation is not Operation.OTHER and operation not in self.methods:
            return DecodeFailure(
                id_,
                Failure(FailureKind.UNKNOWN_METHOD, f"Method not found: {method}"),
                method,
            )
        notification = operation in NOTIFICATIONS
        if notification != ("id" not in message) and operation is not Operation.OTHER:
            kind = "a notification" if notification else "a request"
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
        client.adapter = self  # decided once, at selection: it travels with the call
        client.tasks = self.runs_client_tasks(client.capabilities)
        params, answers, state = self.answers_for(operation, params)
        params, meta, progress_token = self.actions_for(operation, params)
        call = self.build_call(
            id_, operation, method, params, client, meta, progress_token, answers, state
        )
        if self.mirrors_params and operation is Operation.TOOLS_CALL:
            call.param_headers = self.param_headers_of(preamble)
        return call

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

    def encode_verbatim(self, call: Call, result: dict[str, Any]) -> Message:
        return rpc.result(call.id, result)

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
        asked = {
            "asks": {
                key: {"method": a.method, "params": a.params} for key, a in outcome.asks.items()
            },
            "state": outcome.state or "",
        }
        return {
            "content": [{"type": "text", "text": "\n".join(lines)}],
            "isError": False,
            "_meta": {ASKED_META: asked},
        }

    @staticmethod
    def failure_is_result(failure: Failure, operation: Operation | None) -> bool:
        """Argument failures are results: the model asked, and deserves to be told
        (so they travel as a tool result, with HTTP 200 and no failure headers)."""
        return failure.kind is FailureKind.INVALID_ARGUMENTS and operation is Operation.TOOLS_CALL

    def encode_failure(
        self, id_: Any, failure: Failure, operation: Operation | None = None
    ) -> Message:
        if self.failure_is_result(failure, operation):
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
        content_type = (preamble.headers.get("content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return Failure(
                FailureKind.UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json"
            )
        if preamble.transport == "http":
            accept = (preamble.headers.get("accept") or "").lower()
            wildcard = "*/*" in accept
            if not wildcard and (
                "application/json" not in accept or "text/event-stream" not in accept
            ):
                return Failure(
                    FailureKind.NOT_ACCEPTABLE,
                    "Accept must list both application/json and text/event-stream",
                )
        return None

    def param_headers_of(self, preamble: Preamble) -> dict[str, str] | None:
        """The `Mcp-Param-*` headers of a Streamable HTTP POST, by lower-case name
        after the prefix (None: another transport, which carries no such headers)."""
        if preamble.transport != "http" or preamble.http_method != "POST":
            return None
        prefix = len("mcp-param-")
        return {k[prefix:]: v for k, v in preamble.headers.items() if k.startswith("mcp-param-")}

    def check_declared_headers(
        self,
        declared: dict[tuple[str, ...], str],
        arguments: Any,
        headers: Mapping[str, str] | None,
    ) -> Failure | None:
        """A tools/call's `Mcp-Param-*` headers against the header parameters the called
        tool declares (its `x-mcp-header` paths, :meth:`client_param_paths`) and the
        body's arguments: none before the stateless era."""
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
