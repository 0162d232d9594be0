"""Tasks across eras: a client of the tasks extension, an upstream of core tasks.

The upstream (handshake era) offers core tasks for `tools/call` and says which
tools take them; the client asks for the tasks extension.  The gateway then:

- advertises the extension in discovery (the client's adapter words it);
- runs such a client's `tools/call` of a task-capable tool as a task upstream
  and answers with the upstream's task, in the extension's form;
- answers `tasks/get` with the upstream's task and, once it is terminal, the
  result (or error) from the upstream's `tasks/result`, inline;
- turns `tasks/cancel` into the upstream's, acknowledged with an empty result;
- while the upstream's task is `input_required`, holds its `tasks/result` open
  (the core way to receive the task's requests), shows the requests arriving on
  it as the task's input requests, and answers them from `tasks/update`.

Revision-free: the upstream's adapter reads and writes the core design's shapes
(client role), the client's adapter writes the extension's (server role); the
bridge itself holds Task values and Asks."""

from __future__ import annotations

import asyncio
import contextlib
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
    Task,
    Value,
    discard_event,
)
from gateway.core.limits import FairTable, Quota
from gateway.core.pending import Questions
from gateway.core.task import INPUT_REQUIRED, WITH_RESULT
from gateway.protocol import Adapter, AdapterSet, adapter_of

# What the upstream says of a tool's task support that lets it run as a task.
TASK_SUPPORTED = frozenset({"optional", "required"})
# How long a `tasks/get` of an `input_required` task waits for the upstream's
# requests to arrive on the held `tasks/result` (seconds); without them by then
# the client is told the status alone and polls again.
INPUT_WAIT = 2.0
# Held `tasks/result` calls (each an upstream stream kept open) one principal, and the
# route, may have at once: tasks awaiting input beyond these are refused on `tasks/get`.
HELD_PER_PRINCIPAL = 32
HELD_TOTAL = 1_000
# Tasks whose maker this replica remembers: in all, and per principal (a flood of one
# caller's tasks forgets its own oldest, never another's).
MAX_MAKERS = 10_000
MAX_MAKERS_PER_PRINCIPAL = 1_000
# In a cluster, the task ids a client sees name the replica that holds the task:
# ``gwtask.<replica id>.<the upstream's id>``, so that any replica relays its
# `tasks/*` there (gateway/cluster/owner.py), as session ids and requestState do.
TASK_MARK = "gwtask."


class _Verdict(Protocol):
    @property
    def adapter(self) -> Adapter: ...


@runtime_checkable
class TaskUpstream(Protocol):
    """An upstream link that knows its revision and its tools' task support."""

    async def handle(self, call: Call, exchange: Exchange) -> Outcome: ...

    async def task_support(self, call: Call, exchange: Exchange) -> str | None: ...

    @property
    def stateless(self) -> bool: ...

    @property
    def verdict(self) -> _Verdict | None: ...


@dataclass
class _Inputs:
    """An upstream task's `tasks/result`, held open while the task needs input:
    the requests that arrived on it, by key, each waiting for its answer."""

    task_id: str
    runner: asyncio.Task[Outcome] | None = None
    questions: Questions[Ask, Answer] = field(init=False)

    def __post_init__(self) -> None:
        self.questions = Questions(f"{self.task_id}-")

    def requests(self) -> dict[str, Ask]:
        return self.questions.unanswered()


class TaskBridge:
    """Extension tasks for one route, run as the upstream's core tasks."""

    def __init__(
        self, upstream: object, adapters: AdapterSet | None = None, owner: str | None = None
    ) -> None:
        self.upstream = upstream if isinstance(upstream, TaskUpstream) else None
        self.adapters = adapters or AdapterSet.default()
        self._mark = f"{TASK_MARK}{owner}." if owner else ""
        # Who made each task run here (the upstream's id -> principal), bounded: a
        # task id another principal sends is not theirs, whatever the upstream says.
        self._makers: FairTable[str] = FairTable(
            "tasks", MAX_MAKERS, MAX_MAKERS_PER_PRINCIPAL, idle=lambda _: True, end=lambda _: None
        )
        # Held `tasks/result` calls, by (principal, task id), and how many each holds.
        self._inputs: dict[tuple[str, str], _Inputs] = {}
        self.held = Quota("tasks awaiting input", HELD_PER_PRINCIPAL, HELD_TOTAL)

    def _speaks(self) -> Adapter | None:
        """The upstream's adapter (client role), once its revision is known."""
        verdict = self.upstream.verdict if self.upstream is not None else None
        return verdict.adapter if verdict is not None else None

    def _client(self, call: Call) -> Adapter | None:
        """The client's adapter (server role): the one that decoded the call."""
        return adapter_of(call.client)

    def bridged(self, profile: ServerProfile) -> bool:
        """Whether the gateway runs this upstream's core tasks as extension tasks."""
        upstream, speaks = self.upstream, self._speaks()
        return (
            upstream is not None
            and speaks is not None
            and not upstream.stateless
            and speaks.client_runs_tool_tasks(profile.capabilities)
        )

    def applies(self, call: Call, profile: ServerProfile) -> bool:
        client = self._client(call)
        return (
            client is not None
            and client.runs_client_tasks(call.client.capabilities)
            and self.bridged(profile)
        )

    async def call_tool(self, call: Call, exchange: Exchange) -> Outcome | None:
        """The call run as an upstream task, or None when the tool takes no tasks."""
        upstream, speaks, client = self.upstream, self._speaks(), self._client(call)
        assert upstream is not None and speaks is not None and client is not None
        if await upstream.task_support(call, exchange) not in TASK_SUPPORTED:
            return None
        outcome = await upstream.handle(
            replace(call, params=speaks.client_as_task(call.params)), exchange
        )
        if isinstance(outcome, Value):
            task = speaks.client_read_created_task(outcome.result)
            if task is not None:
                self._makers.keep(exchange.principal, task.id)
                return Value(client.task_result(self._outward(task)))
        return outcome

    def _outward(self, task: Task) -> Task:
        """The task as its client sees it: in a cluster, its id names this replica."""
        return replace(task, id=self._mark + task.id) if self._mark else task

    def _refused(self, call: Call, exchange: Exchange) -> Failure | None:
        """A task this caller may not ask about: another principal's, or one whose
        replica is gone."""
        maker = self._makers.owner_of(str(self._task_id(call)))
        if maker is not None and maker != exchange.principal:
            return Failure(FailureKind.INVALID_PARAMS, "no such task")
        return self._gone(call)

    def _gone(self, call: Call) -> Failure | None:
        """A task id that names another replica reached this one: that replica is gone
        (else the request was relayed to it), and its tasks ended with it."""
        task_id = self._client_task_id(call)
        if not self._mark or not isinstance(task_id, str) or not task_id.startswith(TASK_MARK):
            return None
        if task_id.startswith(self._mark):
            return None
        return Failure(
            FailureKind.INVALID_PARAMS,
            "this task ended: the gateway replica that ran it has stopped; call the tool again",
        )

    async def get(self, call: Call, exchange: Exchange) -> Outcome:
        speaks, client = self._speaks(), self._client(call)
        assert speaks is not None and client is not None
        refused = self._refused(call, exchange)
        if refused is not None:
            return refused
        outcome = await self._upstream(call, exchange, Operation.TASKS_GET)
        if not isinstance(outcome, Value):
            return outcome
        task = speaks.client_read_task(outcome.result)
        if task is None:
            return outcome
        final: Outcome | None = None
        requests: dict[str, Ask] | Failure = {}
        if task.status in WITH_RESULT:
            final = await self._upstream(call, exchange, Operation.TASKS_RESULT)
        elif task.status == INPUT_REQUIRED:
            requests = await self._input_requests(call, exchange, task)
        if isinstance(requests, Failure):
            return requests
        return Value(client.detailed_task_result(self._outward(task), final, requests))

    async def update(self, call: Call, exchange: Exchange) -> Outcome:
        """Answers to a task's input requests, for the held `tasks/result` to relay."""
        refused = self._refused(call, exchange)
        if refused is not None:
            return refused
        task_id = self._task_id(call)
        inputs = self._inputs.get((exchange.principal, str(task_id)))
        if inputs is None:
            return Failure(FailureKind.INVALID_PARAMS, f"task {task_id} awaits no input")
        inputs.questions.answer(call.answers or {})  # unknown or repeated keys ignored
        return Value({})

    async def cancel(self, call: Call, exchange: Exchange) -> Outcome:
        refused = self._refused(call, exchange)
        if refused is not None:
            return refused
        outcome = await self._upstream(call, exchange, Operation.TASKS_CANCEL)
        if isinstance(outcome, Value):
            key = (exchange.principal, str(self._task_id(call)))
            inputs = self._inputs.get(key)
            if inputs is not None:
                self._forget(key, inputs)
                if inputs.runner is not None:
                    inputs.runner.cancel()
            return Value({})
        return outcome

    def _client_task_id(self, call: Call) -> Any:
        client = self._client(call)
        return client.task_id(call.params) if client is not None else None

    def _task_id(self, call: Call) -> Any:
        """The upstream's id of the task the client names (this replica's mark off)."""
        task_id = self._client_task_id(call)
        if self._mark and isinstance(task_id, str) and task_id.startswith(self._mark):
            return task_id[len(self._mark) :]
        return task_id

    async def close(self) -> None:
        runners = [i.runner for i in self._inputs.values() if i.runner is not None]
        for key, inputs in list(self._inputs.items()):
            self._forget(key, inputs)
        for runner in runners:
            runner.cancel()
        for runner in runners:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner

    async def _input_requests(
        self, call: Call, exchange: Exchange, task: Task
    ) -> dict[str, Ask] | Failure:
        """The task's open requests: its `tasks/result` is held (started if need be,
        within the principal's quota) and given a bounded while to bring them."""
        key = (exchange.principal, task.id)
        inputs = self._inputs.get(key)
        if inputs is None:
            refused = self.held.acquire(exchange.principal)
            if refused is not None:
                return refused
            inputs = self._inputs[key] = _Inputs(task.id)
            inputs.runner = self._hold(call, exchange, task.id, inputs)
            inputs.runner.add_done_callback(lambda _: self._forget(key, inputs))
        runner = inputs.runner
        assert runner is not None
        if not inputs.requests() and not runner.done():
            await inputs.questions.next_change(runner, INPUT_WAIT)
        return inputs.requests()

    def _hold(
        self, call: Call, exchange: Exchange, task_id: str, inputs: _Inputs
    ) -> asyncio.Task[Outcome]:
        client = call.client.capabilities

        async def ask(question: Ask) -> Answer | None:
            if not question.allowed_by(client):
                return Answer.refusal(question.kind)
            key, answer = inputs.questions.ask(question)
            try:
                return await answer
            finally:
                inputs.questions.forget(key)

        # Nobody's request stays open for it: its events have nowhere to go.
        held = replace(exchange, ask=ask, emit=discard_event)
        return asyncio.get_running_loop().create_task(
            self._upstream(call, held, Operation.TASKS_RESULT)
        )

    def _forget(self, key: tuple[str, str], inputs: _Inputs) -> None:
        if self._inputs.get(key) is inputs:
            del self._inputs[key]
            self.held.release(key[0])

    async def _upstream(self, call: Call, exchange: Exchange, operation: Operation) -> Outcome:
        upstream, speaks = self.upstream, self._speaks()
        assert upstream is not None and speaks is not None
        params = speaks.client_task_params(self._task_id(call))
        asked = replace(call, operation=operation, method=operation.value, params=params)
        return await upstream.handle(asked, exchange)
