"""The stateless era (2026-07-28 and after): no initialize, no session.  Every request
carries its own `_meta` (protocol version, client capabilities), servers never send
requests and ask for input with `input_required` results instead, `server/discover`
says what a server speaks and `subscriptions/listen` carries change notifications.

What every revision of the era does is here, as the handshake era's is in
:mod:`.handshake`; a revision's own file names it and lists its tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from gateway.core import (
    CACHEABLE,
    MAY_ASK,
    NOTIFICATIONS,
    Answer,
    Ask,
    AskKind,
    Call,
    ClientContext,
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
from gateway.protocol.adapter import (
    TASKS_EXTENSION,
    Adapter,
    Message,
    decode_header_value,
    encode_header_value,
    runs_tool_tasks,
)
from gateway.protocol.models import LOG_LEVELS
from gateway.protocol.param_headers import SAFE_INTEGER, param_header_mismatch, param_paths

PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL = "io.modelcontextprotocol/logLevel"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
# The per-request protocol keys: consumed on decode, re-stamped on the way out.
PROTOCOL_META_KEYS = frozenset({PROTOCOL_VERSION, CLIENT_CAPABILITIES, CLIENT_INFO, LOG_LEVEL})
# subscriptions/listen: the acknowledgement, and the filter's keys (list changes by
# the notification each opts into, and the resource URIs watched).
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
LIST_KEYS = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
URIS_KEY = "resourceSubscriptions"
# Requests whose Mcp-Name header mirrors a body field.
NAMED = {  # the params field that `Mcp-Name` mirrors, by method
    Operation.TOOLS_CALL.value: "name",
    Operation.PROMPTS_GET.value: "name",
    Operation.RESOURCES_READ.value: "uri",
}


class StatelessEra(Adapter):
    """The stateless era's behaviour; a revision subclasses it with its tables."""

    can_ask = True
    asks_in_arguments = False
    has_handshake = False
    allows_batch = False

    ask_kinds = frozenset(AskKind)
    pushable_asks = frozenset[AskKind]()  # servers MUST NOT send requests
    session_header: ClassVar[str | None] = None
    version_header = True
    resumable_streams = False  # each request's stream is its own; no Last-Event-ID
    primes_streams = False
    # A modern server's refusal of a probe: header mismatch, missing capability,
    # unsupported version (codes no earlier revision defines).
    era_refusal_codes = frozenset({-32020, -32021, -32022})

    @classmethod
    def named_version(cls, message: dict[str, Any]) -> str | None:
        """Every request names its revision in `_meta`."""
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(PROTOCOL_VERSION) if isinstance(meta, dict) else None
        return version if isinstance(version, str) else None

    def translate_code(self, code: int) -> int:
        # Legacy "resource not found" reads as invalid params here.
        return -32602 if code == -32002 else code

    def http_status(self, failure: Failure) -> int:
        code = failure.code
        if failure.kind is FailureKind.UPSTREAM_ERROR and code in self.era_refusal_codes:
            # Passed through from an upstream of another era (a handshake-era server
            # refusing a capability the client did not declare, say), the code means
            # here what this revision says it means, and its status goes with it.
            return self.statuses.get(self.client_error_kinds[code], 200)
        return super().http_status(failure)

    # ---------------------------------------------------------------- server

    def check_params(
        self, operation: Operation, params: dict[str, Any], preamble: Preamble
    ) -> Failure | None:
        if operation in NOTIFICATIONS or rpc.is_notification(preamble.body):
            return None  # notification `_meta` is optional (vendor notifications too)
        responses = params.get("inputResponses")
        if responses is not None and not (
            isinstance(responses, dict) and all(isinstance(v, dict) for v in responses.values())
        ):
            return Failure(
                FailureKind.INVALID_PARAMS, "inputResponses must map each key to a result object"
            )
        state = params.get("requestState")
        if state is not None and not isinstance(state, str):
            return Failure(FailureKind.INVALID_PARAMS, "requestState must be a string")
        meta = params.get("_meta")
        if not isinstance(meta, dict):
            return Failure(FailureKind.INVALID_PARAMS, "params._meta is required")
        version = meta.get(PROTOCOL_VERSION)
        if not isinstance(version, str):
            return Failure(FailureKind.INVALID_PARAMS, f"_meta[{PROTOCOL_VERSION!r}] is required")
        if version != self.version:
            return Failure(
                FailureKind.UNSUPPORTED_VERSION,
                f"Unsupported protocol version: {version}",
                {"supported": [self.version], "requested": version},
            )
        if not isinstance(meta.get(CLIENT_CAPABILITIES), dict):
            return Failure(
                FailureKind.INVALID_PARAMS, f"_meta[{CLIENT_CAPABILITIES!r}] is required"
            )
        level = meta.get(LOG_LEVEL)
        if level is not None and level not in LOG_LEVELS:
            return Failure(FailureKind.INVALID_PARAMS, f"unknown log level: {level!r}")
        return None

    def client_info_for(
        self, operation: Operation, params: dict[str, Any], preamble: Preamble
    ) -> ClientContext:
        meta = params.get("_meta") or {}
        info = meta.get(CLIENT_INFO)
        # Notifications are not checked for the request keys: trust only well-typed values.
        capabilities = meta.get(CLIENT_CAPABILITIES)
        level = meta.get(LOG_LEVEL)
        return ClientContext(
            protocol_version=self.version,
            capabilities=dict(capabilities) if isinstance(capabilities, dict) else {},
            info=info if isinstance(info, dict) else None,
            log_level=level if isinstance(level, str) else None,
        )

    def answers_for(
        self, operation: Operation, params: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Answer] | None, str | None]:
        if "inputResponses" not in params and "requestState" not in params:
            return params, None, None
        params = dict(params)
        responses = params.pop("inputResponses", None)
        state = params.pop("requestState", None)
        if operation not in MAY_ASK and operation is not Operation.TASKS_UPDATE:
            return params, None, None  # unexpected entries are ignored
        answers = None
        if isinstance(responses, dict):
            answers = {
                str(key): Answer(result=value if isinstance(value, dict) else {})
                for key, value in responses.items()
            }
        return params, answers, state if isinstance(state, str) else None

    def actions_for(
        self, operation: Operation, params: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any], str | int | None]:
        params, meta, token = super().actions_for(operation, params)
        return params, {k: v for k, v in meta.items() if k not in PROTOCOL_META_KEYS}, token

    def encode_value(self, call: Call, profile: ServerProfile, value: Value) -> Message:
        if (
            call.operation is Operation.TOOLS_LIST
            and not self.offers_task_tools
            and self.runs_client_tasks(call.client.capabilities)
            and runs_tool_tasks(profile.capabilities)
        ):
            # The gateway runs the upstream's core tasks as extension tasks for this
            # client: its task-only tools are callable, so they are not hidden.
            return self.task_clients.encode_value(call, profile, value)
        return super().encode_value(call, profile, value)

    def project_result_fields(self, result: dict[str, Any]) -> dict[str, Any]:
        out = super().project_result_fields(result)
        out.setdefault("resultType", "complete")  # required on every result
        return out

    def project_result(
        self, operation: Operation, result: dict[str, Any], profile: ServerProfile
    ) -> dict[str, Any]:
        out = super().project_result(operation, result, profile)
        # A task (tasks extension) passes as it came; anything else read as a value
        # is complete (the upstream's own "input_required" never becomes a Value).
        if out.get("resultType") != "task":
            out["resultType"] = "complete"
        if operation is Operation.TASKS_GET and isinstance(out.get("inputRequests"), dict):
            out["inputRequests"] = {
                key: self._project_input_request(request)
                for key, request in out["inputRequests"].items()
            }
        if operation in CACHEABLE:
            out.setdefault("ttlMs", profile.cache_ttl_ms)
            out.setdefault("cacheScope", profile.cache_scope)
        raw_meta = out.get("_meta")
        meta = dict(raw_meta) if isinstance(raw_meta, dict) else {}
        meta.setdefault(SERVER_INFO, self.describe_implementation(profile.info))
        out["_meta"] = meta
        return out

    def encode_input_required(
        self, call: Call, profile: ServerProfile, outcome: InputRequired
    ) -> Message:
        result: dict[str, Any] = {"resultType": "input_required"}
        if outcome.asks:
            result["inputRequests"] = {
                key: {"method": ask.kind.value, "params": self.project_ask_params(ask)}
                for key, ask in outcome.asks.items()
            }
        if outcome.state is not None:
            result["requestState"] = outcome.state
        if outcome.meta:
            result["_meta"] = dict(outcome.meta)
        return rpc.result(call.id, result)

    def _project_input_request(self, request: Any) -> Any:
        """A task's input request as this revision's input requests look."""
        kind = AskKind.for_method(request.get("method")) if isinstance(request, dict) else None
        params = request.get("params") if isinstance(request, dict) else None
        if kind is None or not isinstance(params, dict):
            return request
        return {"method": kind.method, "params": self.project_ask_params(Ask(kind, params))}

    def project_ask_params(self, ask: Ask) -> dict[str, Any]:
        # Upstream-only correlation fields have no place in an input request.
        params = {k: v for k, v in ask.params.items() if k not in ("_meta", "task")}
        if ask.kind is AskKind.ELICIT:
            params.pop("elicitationId", None)
        return params

    def encode_event(self, event: Event, listen_id: Any = None) -> Message | None:
        message = super().encode_event(event, listen_id)
        if message is not None and listen_id is not None:
            params = message.setdefault("params", {})
            raw_meta = params.get("_meta")
            meta = raw_meta if isinstance(raw_meta, dict) else {}
            params["_meta"] = {**meta, SUBSCRIPTION_ID: listen_id}
        return message

    def client_read_event(self, message: Message) -> Event | None:
        """An upstream notification, without the upstream's own subscription id (the
        gateway tags what it relays with its client's listen id, or nothing)."""
        event = super().client_read_event(message)
        if event is None or not isinstance(event.params.get("_meta"), dict):
            return event
        meta = {k: v for k, v in event.params["_meta"].items() if k != SUBSCRIPTION_ID}
        params = {k: v for k, v in event.params.items() if k != "_meta"}
        if meta:
            params["_meta"] = meta
        return Event(event.method, params)

    # ---- subscriptions/listen, both roles

    def client_read_failure(self, error: Any) -> Failure:
        failure = super().client_read_failure(error)
        data = failure.data
        if (
            failure.kind is FailureKind.INVALID_PARAMS
            and isinstance(data, dict)
            and isinstance(data.get("uri"), str)
        ):
            # This revision's "Resource not found" (-32602 with the URI in data, as
            # -32002 may no longer be sent): read as what it is, so an older client
            # gets its own code, and a missing resource reads as a hidden one does
            # (the gateway's own words for it, too).
            return Failure(FailureKind.RESOURCE_NOT_FOUND, "Resource not found", data)
        return failure

    def listen_interest(self, params: dict[str, Any]) -> Interest:
        wanted = params.get("notifications")
        wanted = wanted if isinstance(wanted, dict) else {}
        uris = wanted.get(URIS_KEY)
        if uris is not None and not (
            isinstance(uris, list) and all(isinstance(uri, str) for uri in uris)
        ):
            # A URI a rule cannot read must not be read loosely upstream either.
            raise Failure(FailureKind.INVALID_PARAMS, f"{URIS_KEY} must be a list of URIs")
        return Interest(
            frozenset(method for key, method in LIST_KEYS.items() if wanted.get(key) is True),
            tuple(uris) if uris is not None else None,
        )

    def listen_acknowledgement(self, honoured: Interest) -> Event:
        return Event(ACKNOWLEDGED, {"notifications": _listen_filter(honoured)})

    def client_listen_params(self, wanted: Interest) -> dict[str, Any]:
        return {"notifications": _listen_filter(wanted)}

    def client_read_acknowledgement(self, event: Event) -> Interest | None:
        if event.method != ACKNOWLEDGED:
            return None
        # A filter that is no object honours nothing (listen_interest reads it so).
        try:
            return self.listen_interest({"notifications": event.params.get("notifications")})
        except Failure:
            return Interest()  # URIs that are not a list of strings: none honoured

    def discover_result(
        self, profile: ServerProfile, supported: list[str], *, tasks: bool = False
    ) -> dict[str, Any]:
        capabilities = self.capabilities(profile.capabilities)
        if tasks:
            # The gateway runs the upstream's core tasks as the tasks extension's.
            raw = capabilities.get("extensions")
            extensions = dict(raw) if isinstance(raw, dict) else {}
            extensions.setdefault(TASKS_EXTENSION, {})
            capabilities = {**capabilities, "extensions": extensions}
        result: dict[str, Any] = {"supportedVersions": supported, "capabilities": capabilities}
        if profile.instructions:
            result["instructions"] = profile.instructions
        return self.project_result(Operation.DISCOVER, result, profile)

    def check_http(self, preamble: Preamble) -> Failure | None:
        failure = super().check_http(preamble)
        if failure is not None or preamble.http_method != "POST":
            return failure
        body = preamble.body
        if not isinstance(body, dict) or not isinstance(body.get("method"), str):
            return None  # the decoder reports what is wrong with the body itself
        header_version = preamble.headers.get("mcp-protocol-version")
        # Any JSON value may arrive as params: the decoder refuses a non-object one.
        raw = body.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        meta_version = preamble.named_version  # as selection read it from `_meta`
        if header_version is None:
            return _mismatch("the MCP-Protocol-Version header is required")
        if meta_version is not None and header_version != meta_version:
            return _mismatch("MCP-Protocol-Version does not match _meta protocolVersion")
        if body.get("id") is None:
            return None  # headers on notifications are not defined
        method_header = preamble.headers.get("mcp-method")
        if method_header is None:
            return _mismatch("the Mcp-Method header is required")
        if method_header != body["method"]:
            return _mismatch("Mcp-Method does not match the body's method")
        field = NAMED.get(method_header)
        if field is not None:
            name_header = preamble.headers.get("mcp-name")
            value = params.get(field)
            if name_header is None:
                return _mismatch("the Mcp-Name header is required")
            if decode_header_value(name_header) != value:
                return _mismatch(f"Mcp-Name does not match params.{field}")
        return None

    mirrors_params = True
    verbatim_operations = frozenset({Operation.TOOLS_CALL, Operation.PROMPTS_GET})

    def verbatim_result(
        self, operation: Operation, message: Message, profile: ServerProfile
    ) -> dict[str, Any] | None:
        """A complete result, whole as the projection sees it, its two defaults (
        ``resultType``, the server's name in ``_meta``) filled in the same way."""
        result = super().verbatim_result(operation, message, profile)
        if result is None or result.get("resultType", "complete") != "complete":
            return None
        meta = result.get("_meta")
        if meta is None or SERVER_INFO not in meta or "resultType" not in result:
            named = {SERVER_INFO: self.describe_implementation(profile.info), **(meta or {})}
            return {**result, "resultType": "complete", "_meta": named}
        return result

    def check_declared_headers(
        self,
        declared: dict[tuple[str, ...], str],
        arguments: Any,
        headers: Mapping[str, str] | None,
    ) -> Failure | None:
        """Each `Mcp-Param-{Name}` the tool declares: present exactly when its argument
        has a value, well-formed (visible ASCII, or valid `=?base64?...?=`), and equal
        to that value once decoded.  ``headers`` None: a transport without them."""
        if headers is None:
            return None
        wrong = param_header_mismatch(declared, arguments, headers)
        return _mismatch(wrong) if wrong is not None else None

    # ---------------------------------------------------------------- client

    def client_headers(
        self, call: Call | None, session_id: str | None, message: Message | None = None
    ) -> dict[str, str]:
        """Headers mirror the body: method, and the name or URI the request is about."""
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": self.version,
        }
        if call is not None:
            method, params = call.method, call.params
        elif message is not None and isinstance(message.get("method"), str):
            method, params = message["method"], message.get("params") or {}
        else:
            return headers
        headers["Mcp-Method"] = method
        field = NAMED.get(method)
        value = params.get(field) if field else None
        if isinstance(value, str):
            headers["Mcp-Name"] = encode_header_value(value)
        return headers

    def client_decorate_params(self, call: Call, params: dict[str, Any]) -> dict[str, Any]:
        """Who is asking, on every request: the server keeps nothing between them."""
        meta = dict(params.get("_meta") or {})
        meta[PROTOCOL_VERSION] = self.version
        meta[CLIENT_CAPABILITIES] = self.client_project_capabilities(call.client.capabilities)
        if call.client.info is not None:
            meta[CLIENT_INFO] = self.describe_implementation(call.client.info)
        if call.client.log_level is not None:
            meta[LOG_LEVEL] = call.client.log_level
        return {**params, "_meta": meta}

    def client_project_params(self, call: Call) -> dict[str, Any]:
        params = super().client_project_params(call)
        if call.answers is not None:
            params["inputResponses"] = {
                key: answer.result or {} for key, answer in call.answers.items()
            }
        if call.state is not None:
            params["requestState"] = call.state
        return params

    def client_input_requests(self, message: Message) -> dict[str, Ask]:
        result = message.get("result")
        if not isinstance(result, dict):
            return {}
        requests = result.get("inputRequests")
        if not isinstance(requests, dict):
            return {}
        asks = {}
        for key, request in requests.items():
            if not isinstance(request, dict):
                continue
            kind = AskKind.for_method(request.get("method"))
            params = request.get("params")
            if kind is not None:
                asks[str(key)] = Ask(kind, dict(params) if isinstance(params, dict) else {})
        return asks

    def client_read_response(self, call: Call, message: Message) -> Outcome:
        outcome = super().client_read_response(call, message)
        if not isinstance(outcome, Value):
            return outcome
        kind = outcome.result.get("resultType", "complete")
        if kind == "input_required":
            state = outcome.result.get("requestState")
            return InputRequired(
                self.client_input_requests(message), state if isinstance(state, str) else None
            )
        if kind not in ("complete", "task"):
            return Failure(FailureKind.UPSTREAM_PROTOCOL, f"unknown resultType {kind!r}")
        return outcome

    def client_read_created_task(self, result: dict[str, Any]) -> Task | None:
        """The tasks extension's created task is the result itself (``resultType``
        "task"), not a ``task`` inside it as in core tasks."""
        return self.client_read_task(result) if result.get("resultType") == "task" else None

    def client_read_profile(self, result: dict[str, Any]) -> ServerProfile:
        meta = result.get("_meta") or {}
        versions = [v for v in result.get("supportedVersions") or [] if isinstance(v, str)]
        if self.version in versions:
            versions.remove(self.version)
        return ServerProfile(
            info=meta.get(SERVER_INFO) or {"name": "upstream", "version": "0"},
            capabilities=result.get("capabilities") or {},
            instructions=result.get("instructions"),
            versions=(self.version, *versions),
            ask_kinds=tuple(kind.value for kind in self.ask_kinds),
        )

    def client_param_paths(self, tool: dict[str, Any]) -> dict[tuple[str, ...], str] | None:
        """A tool's `x-mcp-header` parameters (argument path -> header name), or None
        when an annotation breaks the rules: such a tool must not be offered.  Worked
        out once per listed tool (every call of it asks again); read-only."""
        hit = _PATHS.get(id(tool))
        if hit is not None and hit[0] is tool:
            return hit[1]
        paths = param_paths(tool)
        if len(_PATHS) >= _PATHS_KEPT:
            _PATHS.clear()
        _PATHS[id(tool)] = (tool, paths)  # the tool is kept: its id stays its own
        return paths

    def client_param_headers(
        self, paths: dict[tuple[str, ...], str], arguments: dict[str, Any]
    ) -> dict[str, str]:
        """`Mcp-Param-{Name}` headers mirroring the annotated argument values."""
        headers = {}
        for path, name in paths.items():
            value: Any = arguments
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, int) and abs(value) <= SAFE_INTEGER:
                text = str(value)
            elif isinstance(value, str):
                text = value
            else:
                continue  # absent (or not a primitive): the header is omitted
            headers[f"Mcp-Param-{name}"] = encode_header_value(text)
        return headers

    def client_opening(
        self, request_id: Any, info: dict[str, Any], capabilities: dict[str, Any]
    ) -> Message:
        """No handshake: discovery is the probe, and says the same things."""
        return rpc.request(
            request_id,
            Operation.DISCOVER.value,
            {
                "_meta": {
                    PROTOCOL_VERSION: self.version,
                    CLIENT_CAPABILITIES: {},
                    CLIENT_INFO: self.describe_implementation(info),
                }
            },
        )


def _listen_filter(interest: Interest) -> dict[str, Any]:
    """A listen's `notifications` filter (asked for, or honoured)."""
    out: dict[str, Any] = {
        key: True for key, method in LIST_KEYS.items() if method in interest.lists
    }
    if interest.uris is not None:
        out[URIS_KEY] = list(interest.uris)
    return out


# Each listed tool's header parameters, by the tool's id (the tool kept with them).
_PATHS: dict[int, tuple[dict[str, Any], dict[tuple[str, ...], str] | None]] = {}
_PATHS_KEPT = 1024


def _mismatch(message: str) -> Failure:
    return Failure(FailureKind.HEADER_MISMATCH, message)
