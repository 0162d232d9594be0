"""Tasks across eras: a client of the tasks extension, an upstream of core tasks.

The upstream (handshake era) declares `tasks.requests.tools.call` and marks tools
with `execution.taskSupport`; the client declares the tasks extension in its
request capabilities.  The gateway then:

- advertises the extension in discovery;
- runs such a client's `tools/call` of a task-capable tool as a task upstream
  (`task: {}`) and answers with the upstream's task, flattened (`resultType:
  "task"`, `ttlMs`, `pollIntervalMs`);
- answers `tasks/get` with the upstream's task and, once it is terminal, the
  result (or error) from the upstream's `tasks/result`, inline; a tool result
  with `isError` is a `completed` task here, not a `failed` one;
- turns `tasks/cancel` into the upstream's, acknowledged with an empty result;
- while the upstream's task is `input_required`, holds its `tasks/result` open
  (the core way to receive the task's requests), shows the requests arriving on
  it as the task's `inputRequests`, and answers them from `tasks/update`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from gateway.core import (
    Answer,
    Ask,
    Call,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    ServerProfile,
    Value,
    discard_event,
)
from gateway.protocol.adapter import TASKS_EXTENSION, declares_tasks_extension, runs_tool_tasks

TERMINAL = frozenset({"completed", "failed", "cancelled"})
# Terminal statuses whose outcome the upstream's tasks/result tells.
WITH_RESULT = frozenset({"completed", "failed"})
# Task fields the two designs share, and the renamed ones (core name -> extension name).
SHARED_FIELDS = ("taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt")
RENAMED_FIELDS = {"ttl": "ttlMs", "pollInterval": "pollIntervalMs"}
TASK_SUPPORTED = frozenset({"optional", "required"})
# How long a `tasks/get` of an `input_required` task waits for the upstream's
# requests to arrive on the held `tasks/result` (seconds); without them by then
# the client is told the status alone and polls again.
INPUT_WAIT = 2.0


@runtime_checkable
class TaskUpstream(Protocol):
    """An upstream link that knows its tools' task support."""

    async def execute(self, call: Call, exchange: Exchange) -> Outcome: ...

    async def task_support(self, call: Call, exchange: Exchange) -> str | None: ...

    @property
    def stateless(self) -> bool: ...


def flatten_task(task: dict[str, Any]) -> dict[str, Any]:
    """A core Task as the extension's Task fields (renamed; unknown fields dropped)."""
    out = {key: task[key] for key in SHARED_FIELDS if key in task}
    for core, extension in RENAMED_FIELDS.items():
        if core in task:
            out[extension] = task[core]
    return out


def created_task(result: dict[str, Any]) -> dict[str, Any] | None:
    """A core `CreateTaskResult{task}` as the extension's flat task result, or None
    when the result is not a created task (the upstream answered synchronously)."""
    task = result.get("task")
    if not isinstance(task, dict) or not isinstance(task.get("taskId"), str):
        return None
    return {"resultType": "task", **flatten_task(task)}


def detailed_task(task: dict[str, Any], outcome: Outcome | None) -> dict[str, Any]:
    """A core Task (from `tasks/get`) plus the terminal outcome (from `tasks/result`)
    as the extension's DetailedTask; a tool error result is a completed task."""
    out = flatten_task(task)
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
    return out


@dataclass
class _Inputs:
    """An upstream task's `tasks/result`, held open while the task needs input:
    the requests that arrived on it, by key, each waiting for its answer."""

    runner: asyncio.Task[Outcome] | None = None
    pending: dict[str, tuple[Ask, asyncio.Future[Answer]]] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    keys: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def requests(self) -> dict[str, dict[str, Any]]:
        return {
            key: {"method": ask.method, "params": dict(ask.params)}
            for key, (ask, answer) in self.pending.items()
            if not answer.done()
        }


class TaskBridge:
    """Extension tasks for one route, run as the upstream's core tasks."""

    def __init__(self, upstream: object) -> None:
        self.upstream = upstream if isinstance(upstream, TaskUpstream) else None
        # Held `tasks/result` calls, by (principal, task id).
        self._inputs: dict[tuple[str, str], _Inputs] = {}

    def bridged(self, profile: ServerProfile) -> bool:
        """Whether the gateway runs this upstream's core tasks as extension tasks."""
        upstream = self.upstream
        return (
            upstream is not None
            and not upstream.stateless
            and runs_tool_tasks(profile.capabilities)
        )

    def applies(self, call: Call, profile: ServerProfile) -> bool:
        return declares_tasks_extension(call.client.capabilities) and self.bridged(profile)

    def advertise(self, capabilities: dict[str, Any], profile: ServerProfile) -> dict[str, Any]:
        """Discovery capabilities with the extension, where the gateway bridges tasks."""
        if not self.bridged(profile):
            return capabilities
        raw = capabilities.get("extensions")
        extensions = dict(raw) if isinstance(raw, dict) else {}
        extensions.setdefault(TASKS_EXTENSION, {})
        return {**capabilities, "extensions": extensions}

    async def call_tool(self, call: Call, exchange: Exchange) -> Outcome | None:
        """The call run as an upstream task, or None when the tool takes no tasks."""
        upstream = self.upstream
        assert upstream is not None
        if await upstream.task_support(call, exchange) not in TASK_SUPPORTED:
            return None
        outcome = await upstream.execute(
            replace(call, params={**call.params, "task": {}}), exchange
        )
        if isinstance(outcome, Value):
            created = created_task(outcome.result)
            if created is not None:
                return Value(created)
        return outcome

    async def get(self, call: Call, exchange: Exchange) -> Outcome:
        outcome = await self._upstream(call, exchange, Operation.TASKS_GET)
        if not isinstance(outcome, Value):
            return outcome
        task_id = outcome.result.get("taskId")
        if not isinstance(task_id, str):
            return outcome
        status = outcome.result.get("status")
        final: Outcome | None = None
        requests: dict[str, dict[str, Any]] = {}
        if status in WITH_RESULT:
            final = await self._upstream(call, exchange, Operation.TASKS_RESULT)
        elif status == "input_required":
            requests = await self._input_requests(call, exchange, task_id)
        detailed = detailed_task(outcome.result, final)
        if requests:
            detailed["inputRequests"] = requests
        return Value({"resultType": "complete", **detailed})

    async def update(self, call: Call, exchange: Exchange) -> Outcome:
        """Answers to a task's input requests, for the held `tasks/result` to relay."""
        task_id = call.params.get("taskId")
        inputs = self._inputs.get((exchange.principal, str(task_id)))
        if inputs is None:
            return Failure(FailureKind.INVALID_PARAMS, f"task {task_id} awaits no input")
        for key, answer in (call.answers or {}).items():
            entry = inputs.pending.get(key)
            if entry is not None and not entry[1].done():
                entry[1].set_result(answer)  # unknown or repeated keys are ignored
        return Value({})

    async def cancel(self, call: Call, exchange: Exchange) -> Outcome:
        outcome = await self._upstream(call, exchange, Operation.TASKS_CANCEL)
        if isinstance(outcome, Value):
            inputs = self._inputs.pop((exchange.principal, str(call.params.get("taskId"))), None)
            if inputs is not None and inputs.runner is not None:
                inputs.runner.cancel()
            return Value({})
        return outcome

    async def close(self) -> None:
        runners = [i.runner for i in self._inputs.values() if i.runner is not None]
        self._inputs.clear()
        for runner in runners:
            runner.cancel()
        for runner in runners:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner

    async def _input_requests(
        self, call: Call, exchange: Exchange, task_id: str
    ) -> dict[str, dict[str, Any]]:
        """The task's open requests: its `tasks/result` is held (started if need be)
        and given a bounded while to bring them."""
        key = (exchange.principal, task_id)
        inputs = self._inputs.get(key)
        if inputs is None:
            inputs = self._inputs[key] = _Inputs()
            inputs.runner = self._hold(call, exchange, task_id, inputs)
            inputs.runner.add_done_callback(lambda _: self._forget(key, inputs))
        runner = inputs.runner
        assert runner is not None
        if not inputs.requests() and not runner.done():
            inputs.changed.clear()
            changed = asyncio.ensure_future(inputs.changed.wait())
            try:
                await asyncio.wait(
                    {runner, changed}, timeout=INPUT_WAIT, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                changed.cancel()
        return inputs.requests()

    def _hold(
        self, call: Call, exchange: Exchange, task_id: str, inputs: _Inputs
    ) -> asyncio.Task[Outcome]:
        client = call.client.capabilities

        async def ask(question: Ask) -> Answer | None:
            if not question.allowed_by(client):
                return Answer.refusal(question.kind)
            key = f"{task_id}-{next(inputs.keys)}"
            answer: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
            inputs.pending[key] = (question, answer)
            inputs.changed.set()
            try:
                return await answer
            finally:
                inputs.pending.pop(key, None)

        # Nobody's request stays open for it: its events have nowhere to go.
        held = replace(exchange, ask=ask, emit=discard_event)
        return asyncio.get_running_loop().create_task(
            self._upstream(call, held, Operation.TASKS_RESULT)
        )

    def _forget(self, key: tuple[str, str], inputs: _Inputs) -> None:
        if self._inputs.get(key) is inputs:
            del self._inputs[key]

    async def _upstream(self, call: Call, exchange: Exchange, operation: Operation) -> Outcome:
        upstream = self.upstream
        assert upstream is not None
        params = {"taskId": call.params.get("taskId")}
        asked = replace(call, operation=operation, method=operation.value, params=params)
        return await upstream.execute(asked, exchange)
