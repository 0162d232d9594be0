"""The tasks bridge, pure: core tasks as the tasks extension's tasks."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from gateway.bridge.tasks import TaskBridge, created_task, detailed_task, flatten_task
from gateway.core import (
    Answer,
    Ask,
    AskKind,
    Call,
    ClientContext,
    Exchange,
    Failure,
    FailureKind,
    Operation,
    Outcome,
    ServerProfile,
    Value,
)

TASKS = "io.modelcontextprotocol/tasks"
CORE_TASK: dict[str, Any] = {
    "taskId": "t1",
    "status": "working",
    "statusMessage": "busy",
    "createdAt": "2026-01-01T00:00:00Z",
    "lastUpdatedAt": "2026-01-01T00:00:01Z",
    "ttl": 60000,
    "pollInterval": 500,
}
TASK_CAPABILITIES = {"tasks": {"requests": {"tools": {"call": {}}}}}


def test_a_task_is_flattened_and_renamed() -> None:
    assert flatten_task(CORE_TASK) == {
        "taskId": "t1",
        "status": "working",
        "statusMessage": "busy",
        "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:01Z",
        "ttlMs": 60000,
        "pollIntervalMs": 500,
    }


def test_an_unlimited_ttl_stays_null_and_absent_fields_stay_absent() -> None:
    task = {"taskId": "t", "status": "working", "ttl": None}
    assert flatten_task(task) == {"taskId": "t", "status": "working", "ttlMs": None}


def test_a_create_task_result_becomes_a_task_result() -> None:
    created = created_task({"task": CORE_TASK})
    assert created is not None
    assert created["resultType"] == "task"
    assert created["taskId"] == "t1" and created["pollIntervalMs"] == 500
    assert "task" not in created and "ttl" not in created


def test_a_synchronous_result_is_not_a_task() -> None:
    assert created_task({"content": []}) is None
    assert created_task({"task": {"status": "working"}}) is None


def test_a_tool_error_is_a_completed_task() -> None:
    failed = {**CORE_TASK, "status": "failed"}
    result = {"content": [{"type": "text", "text": "no"}], "isError": True}
    detailed = detailed_task(failed, Value(result))
    assert detailed["status"] == "completed"
    assert detailed["result"] == result


def test_a_completed_task_carries_its_result() -> None:
    detailed = detailed_task({**CORE_TASK, "status": "completed"}, Value({"content": []}))
    assert detailed["status"] == "completed"
    assert detailed["result"] == {"content": []}
    assert "error" not in detailed


def test_a_protocol_error_is_a_failed_task_with_its_error() -> None:
    failure = Failure(FailureKind.UPSTREAM_ERROR, "boom", {"x": 1}, code=-32000)
    detailed = detailed_task({**CORE_TASK, "status": "failed"}, failure)
    assert detailed["status"] == "failed"
    assert detailed["error"] == {"code": -32000, "message": "boom", "data": {"x": 1}}
    assert "result" not in detailed


def test_a_working_task_has_no_outcome() -> None:
    detailed = detailed_task(CORE_TASK, None)
    assert "result" not in detailed and "error" not in detailed


class _Upstream:
    def __init__(self, stateless: bool = False) -> None:
        self._stateless = stateless

    async def execute(self, call: Call, exchange: Exchange) -> Outcome:
        return Value({})

    async def task_support(self, call: Call, exchange: Exchange) -> str | None:
        return None

    @property
    def stateless(self) -> bool:
        return self._stateless


def _call(capabilities: dict[str, Any]) -> Call:
    return Call(
        id=1,
        operation=Operation.TOOLS_CALL,
        method="tools/call",
        params={"name": "t"},
        client=ClientContext("2026-07-28", capabilities),
    )


def test_the_bridge_applies_only_to_declaring_clients_of_task_upstreams() -> None:
    profile = ServerProfile(capabilities=TASK_CAPABILITIES)
    bridge = TaskBridge(_Upstream())
    declaring = _call({"extensions": {TASKS: {}}})
    assert bridge.applies(declaring, profile)
    assert not bridge.applies(_call({}), profile)
    assert not bridge.applies(_call({"tasks": {}}), profile)  # legacy tasks: non-declaring
    assert not bridge.applies(declaring, ServerProfile(capabilities={"tools": {}}))
    assert not TaskBridge(_Upstream(stateless=True)).applies(declaring, profile)
    assert not TaskBridge(object()).applies(declaring, profile)


def test_discovery_gains_the_extension_only_where_bridged() -> None:
    bridge = TaskBridge(_Upstream())
    profile = ServerProfile(capabilities=TASK_CAPABILITIES)
    advertised = bridge.advertise({"tools": {}, "extensions": {"x/y": {}}}, profile)
    assert advertised["extensions"] == {"x/y": {}, TASKS: {}}
    plain = ServerProfile(capabilities={"tools": {}})
    assert bridge.advertise({"tools": {}}, plain) == {"tools": {}}


class _AskingUpstream(_Upstream):
    """tasks/get says input_required until tasks/result's one question is answered."""

    def __init__(self) -> None:
        super().__init__()
        self.answered: Answer | None = None
        self.finished = asyncio.Event()

    async def execute(self, call: Call, exchange: Exchange) -> Outcome:
        if call.operation is Operation.TASKS_RESULT and self.answered is None:
            assert exchange.ask is not None
            self.answered = await exchange.ask(Ask(AskKind.ELICIT, {"message": "ok?"}))
            self.finished.set()
        if call.operation is Operation.TASKS_RESULT:
            return Value({"content": [{"type": "text", "text": "done"}]})
        status = "input_required" if self.answered is None else "completed"
        return Value({"taskId": "t1", "status": status})


def _task_call(operation: Operation, capabilities: dict[str, Any], **params: Any) -> Call:
    return Call(
        id=1,
        operation=operation,
        method=operation.value,
        params={"taskId": "t1", **params},
        client=ClientContext("2026-07-28", capabilities),
    )


async def test_input_requests_are_held_and_answered_by_update() -> None:
    upstream = _AskingUpstream()
    bridge = TaskBridge(upstream)
    caps = {"extensions": {TASKS: {}}, "elicitation": {}}
    get = _task_call(Operation.TASKS_GET, caps)
    exchange = Exchange(call=get, route="/r", profile=ServerProfile())
    first = await bridge.get(get, exchange)
    assert isinstance(first, Value)
    assert first.result["status"] == "input_required"
    ((key, request),) = first.result["inputRequests"].items()
    assert request == {"method": "elicitation/create", "params": {"message": "ok?"}}
    answer = Answer(result={"action": "accept", "content": {}})
    update = replace(_task_call(Operation.TASKS_UPDATE, caps), answers={key: answer})
    assert await bridge.update(update, exchange) == Value({})
    async with asyncio.timeout(5):
        await upstream.finished.wait()  # the held tasks/result took the answer
    assert upstream.answered == answer
    done = await bridge.get(get, exchange)
    assert isinstance(done, Value)
    assert done.result["status"] == "completed" and "inputRequests" not in done.result
    assert done.result["result"]["content"][0]["text"] == "done"
    await bridge.close()


async def test_an_update_for_a_task_awaiting_nothing_fails() -> None:
    bridge = TaskBridge(_Upstream())
    update = _task_call(Operation.TASKS_UPDATE, {"extensions": {TASKS: {}}})
    exchange = Exchange(call=update, route="/r", profile=ServerProfile())
    failure = await bridge.update(update, exchange)
    assert isinstance(failure, Failure) and failure.kind is FailureKind.INVALID_PARAMS
