"""The client role: the gateway toward an upstream, speaking the upstream's revision.

The opening request and its headers, requests and notifications for calls,
reading responses, failures, server-initiated requests (asks) and events,
the change notifications and listens an upstream offers, and the upstream's
own tasks (core tasks).  Every method here is named `client_*`.
"""

from __future__ import annotations

from typing import Any

from gateway.core import (
    ASK_KINDS,
    Answer,
    Ask,
    Call,
    Event,
    Failure,
    FailureKind,
    Interest,
    Operation,
    Outcome,
    ServerProfile,
    Task,
    Value,
)
from gateway.core import jsonrpc as rpc
from gateway.protocol.adapter.base import Message
from gateway.protocol.adapter.projection import KNOWN_CLIENT_CAPABILITIES, Projection, keep

# A task's fields in core tasks (wire name -> the core Task's fact); the tasks
# extension says the same facts with two lifetimes renamed (server.py).
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


class AdapterClientRole(Projection):
    """One MCP revision as the gateway speaks it to upstreams (the client role)."""

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
        # A revision lists `elicitation` among its client capabilities exactly when
        # it can ask it (a unit test holds every revision to that).
        return keep(capabilities, KNOWN_CLIENT_CAPABILITIES, self.client_capabilities)

    def client_decorate_params(self, call: Call, params: dict[str, Any]) -> dict[str, Any]:
        """Handshake revisions: the session carries who we are; only _meta pass-through."""
        return params

    def client_outgoing(
        self, call: Call, request_id: Any, session_id: str | None
    ) -> tuple[Message, dict[str, str]]:
        """A call's upstream request and the HTTP headers it goes with, in one step
        (on a session: ``session_id``, the upstream's)."""
        return self.client_request(call, request_id), self.client_headers(call, session_id)

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
            kind = ASK_KINDS.get(message["method"])
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
