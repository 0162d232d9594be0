"""The tasks bridge, pure: core tasks as the tasks extension's tasks."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

from gateway.bridge.tasks import TaskBridge
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
from gateway.protocol.adapter import Adapter
from gateway.protocol.selection import AdapterSet

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


SET = AdapterSet.default()
CLIENT = SET.by_version["2026-07-28"]  # server role: the tasks extension
UPSTREAM = SET.by_version["2025-11-25"]  # client role: core tasks


def _flat(task: dict[str, Any]) -> dict[str, Any]:
    """A core task as the extension words it (via the normalized Task)."""
    read = UPSTREAM.client_read_task(task)
    assert read is not None
    return CLIENT.task_result(read)


def test_a_task_is_flattened_and_renamed() -> None:
    assert _flat(CORE_TASK) == {
        "resultType": "task",
        "taskId": "t1",
        "status": "working",
        "statusMessage": "busy",
        "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:01Z",
        "ttlMs": 60000,
        "pollIntervalMs": 500,
    }


def test_an_unlimited_ttl_stays_null_and_absent_fields_stay_absent() -> None:
    task = {"taskId": "t", "status": "working", "ttl": None, "vendor": 1}
    assert _flat(task) == {"resultType": "task", "taskId": "t", "status": "working", "ttlMs": None}


def test_a_create_task_result_becomes_a_task_result() -> None:
    task = UPSTREAM.client_read_created_task({"task": CORE_TASK})
    assert task is not None
    created = CLIENT.task_result(task)
    assert created["resultType"] == "task"
    assert created["taskId"] == "t1" and created["pollIntervalMs"] == 500
    assert "task" not in created and "ttl" not in created


def test_a_synchronous_result_is_not_a_task() -> None:
    assert UPSTREAM.client_read_created_task({"content": []}) is None
    assert UPSTREAM.client_read_created_task({"task": {"status": "working"}}) is None
    assert UPSTREAM.client_read_task({"status": "working"}) is None


def test_a_task_run_asks_for_a_task_upstream() -> None:
    assert UPSTREAM.client_as_task({"name": "t"}) == {"name": "t", "task": {}}
    assert UPSTREAM.client_task_params("t1") == {"taskId": "t1"}
    assert CLIENT.task_id({"taskId": "t1"}) == "t1"


def _detailed(task: dict[str, Any], outcome: Outcome | None) -> dict[str, Any]:
    read = UPSTREAM.client_read_task(task)
    assert read is not None
    detailed = CLIENT.detailed_task_result(read, outcome, {})
    assert detailed.pop("resultType") == "complete"
    return detailed


def test_a_tool_error_is_a_completed_task() -> None:
    failed = {**CORE_TASK, "status": "failed"}
    result = {"content": [{"type": "text", "text": "no"}], "isError": True}
    detailed = _detailed(failed, Value(result))
    assert detailed["status"] == "completed"
    assert detailed["result"] == result


def test_a_completed_task_carries_its_result() -> None:
    detailed = _detailed({**CORE_TASK, "status": "completed"}, Value({"content": []}))
    assert detailed["status"] == "completed"
    assert detailed["result"] == {"content": []}
    assert "error" not in detailed


def test_a_protocol_error_is_a_failed_task_with_its_error() -> None:
    failure = Failure(FailureKind.UPSTREAM_ERROR, "boom", {"x": 1}, code=-32000)
    detailed = _detailed({**CORE_TASK, "status": "failed"}, failure)
    assert detailed["status"] == "failed"
    assert detailed["error"] == {"code": -32000, "message": "boom", "data": {"x": 1}}
    assert "result" not in detailed


def test_a_failed_task_with_a_plain_value_stays_failed() -> None:
    detailed = _detailed({**CORE_TASK, "status": "failed"}, Value({"content": []}))
    assert detailed["status"] == "failed"
    completed = _detailed({**CORE_TASK, "status": "completed"}, Value({"isError": True}))
    assert completed["status"] == "completed"


def test_a_failure_of_the_gateways_own_is_an_internal_error_without_data() -> None:
    failure = Failure(FailureKind.UPSTREAM_TIMEOUT, "too slow")
    detailed = _detailed({**CORE_TASK, "status": "failed"}, failure)
    assert detailed["error"] == {"code": -32603, "message": "too slow"}


def test_a_working_task_has_no_outcome() -> None:
    detailed = _detailed(CORE_TASK, None)
    assert "result" not in detailed and "error" not in detailed
    assert "inputRequests" not in detailed


def test_a_task_waiting_on_input_shows_its_requests() -> None:
    read = UPSTREAM.client_read_task({**CORE_TASK, "status": "input_required"})
    assert read is not None
    ask = Ask(AskKind.ELICIT, {"message": "ok?"})
    detailed = CLIENT.detailed_task_result(read, None, {"t1-1": ask})
    assert detailed["inputRequests"] == {
        "t1-1": {"method": "elicitation/create", "params": {"message": "ok?"}}
    }


@dataclass
class _Verdict:
    adapter: Adapter


class _Upstream:
    def __init__(self, stateless: bool = False) -> None:
        self._stateless = stateless
        adapter = SET.by_version["2026-07-28" if stateless else "2025-11-25"]
        self.verdict = _Verdict(adapter)

    async def handle(self, call: Call, exchange: Exchange) -> Outcome:
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
        client=ClientContext("2026-07-28", capabilities, adapter=SET.by_version["2026-07-28"]),
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
    profile = ServerProfile(capabilities={**TASK_CAPABILITIES, "extensions": {"x/y": {}}})
    bridged = TaskBridge(_Upstream()).bridged(profile)
    assert bridged
    advertised = CLIENT.discover_result(profile, ["2026-07-28"], tasks=bridged)
    assert advertised["capabilities"]["extensions"] == {"x/y": {}, TASKS: {}}
    plain = ServerProfile(capabilities={"tools": {}})
    assert not TaskBridge(_Upstream()).bridged(plain)
    assert "extensions" not in CLIENT.discover_result(plain, [])["capabilities"]


class _AskingUpstream(_Upstream):
    """tasks/get says input_required until tasks/result's one question is answered."""

    def __init__(self) -> None:
        super().__init__()
        self.answered: Answer | None = None
        self.finished = asyncio.Event()

    async def handle(self, call: Call, exchange: Exchange) -> Outcome:
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
        client=ClientContext("2026-07-28", capabilities, adapter=SET.by_version["2026-07-28"]),
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


class _ManyAsking(_Upstream):
    """Every task is `input_required`; its held tasks/result asks one question and then
    waits for it (until the bridge lets it go)."""

    def __init__(self) -> None:
        super().__init__()
        self.holding: set[str] = set()
        self.cancelled: list[str] = []

    async def handle(self, call: Call, exchange: Exchange) -> Outcome:
        task_id = str(call.params["taskId"])
        if call.operation is Operation.TASKS_CANCEL:
            self.cancelled.append(task_id)
            return Value({"taskId": task_id, "status": "cancelled"})
        if call.operation is Operation.TASKS_RESULT:
            assert exchange.ask is not None
            self.holding.add(task_id)
            try:
                await exchange.ask(Ask(AskKind.ELICIT, {"message": task_id}))
            finally:
                self.holding.discard(task_id)
            return Value({"content": []})
        return Value({"taskId": task_id, "status": "input_required"})


async def test_held_task_results_are_bounded_per_principal(monkeypatch: Any) -> None:
    """Each task awaiting input holds an upstream stream open: a principal past its
    quota is refused (in its own revision's words), others are not, and a cancelled
    task gives its place back."""
    monkeypatch.setattr("gateway.bridge.tasks.HELD_PER_PRINCIPAL", 2)
    upstream = _ManyAsking()
    bridge = TaskBridge(upstream)
    caps = {"extensions": {TASKS: {}}, "elicitation": {}}

    async def get(principal: str, task_id: str) -> Outcome:
        call = replace(_task_call(Operation.TASKS_GET, caps), params={"taskId": task_id})
        exchange = Exchange(call=call, route="/r", profile=ServerProfile(), principal=principal)
        return await bridge.get(call, exchange)

    for task_id in ("a1", "a2"):
        held = await get("alice", task_id)
        assert isinstance(held, Value) and held.result["inputRequests"], held
    again = await get("alice", "a1")  # the same task again: no second stream
    assert isinstance(again, Value) and again.result["inputRequests"], again
    refused = await get("alice", "a3")
    assert isinstance(refused, Failure) and refused.kind is FailureKind.QUOTA_EXCEEDED
    assert "at most 2" in refused.message
    assert upstream.holding == {"a1", "a2"}
    other = await get("bob", "b1")
    assert isinstance(other, Value) and other.result["inputRequests"], other

    cancel = replace(_task_call(Operation.TASKS_CANCEL, caps), params={"taskId": "a1"})
    exchange = Exchange(call=cancel, route="/r", profile=ServerProfile(), principal="alice")
    assert await bridge.cancel(cancel, exchange) == Value({})
    now = await get("alice", "a3")
    assert isinstance(now, Value) and now.result["inputRequests"], now
    assert bridge.held.held("alice") == 2 and bridge.held.held("bob") == 1
    await bridge.close()
    assert len(bridge.held) == 0
    assert upstream.holding == set()  # every held stream let go
