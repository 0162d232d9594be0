"""The fake upstream's `tasks` behaviour (2025-11-25 tasks): tools that run as tasks,
tasks/get, tasks/result and tasks/cancel, and a task that needs input asking on its
tasks/result stream."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from tests.e2e.fake_rpc import _answer_text, _rpc_error, _rpc_result, _sse

# The `tasks` behaviour: its capabilities and its tools' task support.
TASKS_CAPABILITIES: dict[str, Any] = {
    "tools": {},
    "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
}
TASK_TOOLS = {"slow": "optional", "batch": "required", "confirm": "optional"}
ASK_CONFIRM = {
    "message": "Go ahead?",
    "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
}
TASK_TIME = "2026-01-01T00:00:00Z"
RELATED_TASK = "io.modelcontextprotocol/related-task"


class TasksBehaviour:
    """Mixed into FakeUpstream, whose state and question helpers it uses."""

    tasks: dict[str, dict[str, Any]]
    task_params: list[dict[str, Any]]
    task_results: dict[str, dict[str, Any]]
    task_requests: list[tuple[str, Any]]
    results: list[dict[str, Any]]
    calls: int

    async def _ask(self, stream: web.StreamResponse, method: str, params: dict[str, Any]) -> Any:
        raise NotImplementedError

    async def _note(self, record: list[dict[str, Any]], message: dict[str, Any]) -> None:
        raise NotImplementedError

    def finish(self, task_id: str, *, is_error: bool = False) -> None:
        """End a working task: completed with `done: <text>`, or failed with that
        text as a tool error result (2025-11-25: a tool error fails the task)."""
        task = self.tasks[task_id]
        task["status"] = "failed" if is_error else "completed"
        text = self.task_results[task_id]["text"]
        result: dict[str, Any] = {"content": [{"type": "text", "text": f"done: {text}"}]}
        if is_error:
            result["isError"] = True
        self.task_results[task_id] = {"text": text, "result": result}

    async def _task_input(self, request: web.Request, id_: Any, task_id: str) -> web.StreamResponse:
        """tasks/result of a task that needs input: its question on this stream,
        tagged with the task, then (answered) the task completes with the answer."""
        stream = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await stream.prepare(request)
        params = {**ASK_CONFIRM, "_meta": {RELATED_TASK: {"taskId": task_id}}}
        try:
            answer = await self._ask(stream, "elicitation/create", params)
            if answer is None:  # released at teardown
                return stream
            task = self.tasks[task_id]
            task["status"] = "completed"
            text = "confirmed: " + _answer_text("elicitation/create", answer)
            result = {"content": [{"type": "text", "text": text}]}
            self.task_results[task_id] = {"text": text, "result": result}
            await self._note(self.results, result)
            related = {RELATED_TASK: {"taskId": task_id}}
            await stream.write(_sse(_rpc_result(id_, {**result, "_meta": related})))
        except (ConnectionError, RuntimeError):
            pass  # the gateway went away
        return stream

    async def _tasks_request(
        self, request: web.Request, id_: Any, method: str, message: dict[str, Any]
    ) -> web.StreamResponse:
        """Every in-session request of the `tasks` behaviour."""
        params = message.get("params") or {}
        if method == "tools/list":
            return web.json_response(_rpc_result(id_, {"tools": _task_tools()}))
        if method == "tools/call":
            return web.json_response(self._task_call(id_, params))
        if method not in ("tasks/get", "tasks/result", "tasks/cancel"):
            return web.json_response(_rpc_error(id_, -32601, f"Method not found: {method}"))
        task_id = params.get("taskId")
        found = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if method == "tasks/result" and found is not None and found["status"] == "input_required":
            return await self._task_input(request, id_, str(task_id))
        self.task_requests.append((method, task_id))
        return web.json_response(self._task_op(id_, method, task_id, found))

    def _task_call(self, id_: Any, params: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        self.task_params.append(params)
        text = str((params.get("arguments") or {}).get("text", ""))
        if "task" not in params:
            if TASK_TOOLS.get(str(params.get("name"))) == "required":
                return _rpc_error(id_, -32601, "this tool runs only as a task")
            return _rpc_result(id_, {"content": [{"type": "text", "text": f"echo: {text}"}]})
        task_id = f"task-{len(self.tasks) + 1}"
        task = {
            "taskId": task_id,
            "status": "working",
            "statusMessage": "on it",
            "createdAt": TASK_TIME,
            "lastUpdatedAt": TASK_TIME,
            "ttl": 60000,
            "pollInterval": 250,
        }
        if params.get("name") == "confirm":
            task["status"] = "input_required"
            task["statusMessage"] = "needs your go-ahead"
        self.tasks[task_id] = task
        self.task_results[task_id] = {"text": text}
        return _rpc_result(id_, {"task": dict(task)})

    def _task_op(
        self, id_: Any, method: str, task_id: Any, found: dict[str, Any] | None
    ) -> dict[str, Any]:
        """tasks/get, tasks/cancel, or tasks/result of a task that needs no input."""
        if found is None:
            return _rpc_error(id_, -32602, f"Unknown task: {task_id}")
        terminal = found["status"] in ("completed", "failed", "cancelled")
        if method == "tasks/get":
            return _rpc_result(id_, dict(found))
        if method == "tasks/cancel":
            if terminal:
                return _rpc_error(id_, -32602, "the task is already terminal")
            found["status"] = "cancelled"
            return _rpc_result(id_, dict(found))
        outcome = self.task_results[str(task_id)].get("result")
        if outcome is None:
            # A real server blocks until the task ends; the gateway asks only then.
            return _rpc_error(id_, -32603, "tasks/result before the task ended")
        related = {RELATED_TASK: {"taskId": task_id}}
        return _rpc_result(id_, {**outcome, "_meta": related})


def _task_tools() -> list[dict[str, Any]]:
    text = {"type": "object", "properties": {"text": {"type": "string"}}}
    tools: list[dict[str, Any]] = [{"name": "echo", "inputSchema": text}]
    tools += [
        {"name": name, "inputSchema": text, "execution": {"taskSupport": support}}
        for name, support in TASK_TOOLS.items()
    ]
    return tools
