"""What the gateway answers itself (the handshake, discovery) comes from the client's
adapter, and reads exactly as it did when the forwarder built it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gateway.bridge.forwarder import Forwarder
from gateway.core import (
    Call,
    ClientContext,
    Exchange,
    Operation,
    Outcome,
    ServerProfile,
    Value,
)
from gateway.protocol.adapter import Adapter
from gateway.protocol.selection import AdapterSet

SET = AdapterSet.default()
TASKS = "io.modelcontextprotocol/tasks"
PROFILE = ServerProfile(
    info={"name": "up", "version": "1", "title": "Up", "websiteUrl": "https://x", "extra": 1},
    capabilities={
        "tools": {"listChanged": True},
        "logging": {},
        "completions": {},
        "tasks": {"requests": {"tools": {"call": {}}}},
        "extensions": {"x/y": {}},
        "vendor": {"z": 1},
    },
    instructions="be kind",
)


@dataclass
class _Verdict:
    adapter: Adapter


class _Upstream:
    def __init__(self, stateless: bool = False) -> None:
        self._stateless = stateless
        adapter = SET.stateless[0] if stateless else SET.by_version["2025-11-25"]
        self.verdict = _Verdict(adapter)

    async def handle(self, call: Call, exchange: Exchange) -> Outcome:
        raise AssertionError("answered by the gateway, never upstream")

    async def task_support(self, call: Call, exchange: Exchange) -> str | None:
        return None

    @property
    def stateless(self) -> bool:
        return self._stateless


def _old_initialize(call: Call, profile: ServerProfile) -> dict[str, Any]:
    """The forwarder's own initialize result, before the adapters built it."""
    result: dict[str, Any] = {
        "protocolVersion": call.client.protocol_version,
        "capabilities": profile.capabilities,
        "serverInfo": profile.info,
    }
    if profile.instructions:
        result["instructions"] = profile.instructions
    return result


def _old_discover(profile: ServerProfile, bridged: bool) -> dict[str, Any]:
    """The forwarder's own discovery result, before the adapters built it."""
    capabilities = dict(profile.capabilities)
    if bridged:
        extensions = dict(capabilities.get("extensions") or {})
        extensions.setdefault(TASKS, {})
        capabilities["extensions"] = extensions
    result: dict[str, Any] = {
        "supportedVersions": [a.version for a in SET.stateless],
        "capabilities": capabilities,
    }
    if profile.instructions:
        result["instructions"] = profile.instructions
    return result


def _call(operation: Operation, version: str) -> Call:
    # As the adapter that decodes it stamps itself on the client.
    client = ClientContext(version, {}, adapter=SET.by_version[version])
    return Call(7, operation, operation.value, {}, client)


@pytest.mark.parametrize("profile", [PROFILE, ServerProfile()], ids=["full", "empty"])
@pytest.mark.parametrize("adapter", [a for a in SET.adapters if a.has_handshake], ids=str)
async def test_initialize_reads_as_before(adapter: Any, profile: ServerProfile) -> None:
    forwarder = Forwarder(_Upstream(), adapters=SET)
    call = _call(Operation.INITIALIZE, adapter.version)
    outcome = await forwarder.handle(call, Exchange(call=call, route="/r", profile=profile))
    before = adapter.encode(call, profile, Value(_old_initialize(call, profile)))
    assert adapter.encode(call, profile, outcome) == before
    await forwarder.close()


@pytest.mark.parametrize("stateless", [False, True], ids=["bridged", "modern-upstream"])
@pytest.mark.parametrize("profile", [PROFILE, ServerProfile()], ids=["full", "empty"])
async def test_discovery_reads_as_before(stateless: bool, profile: ServerProfile) -> None:
    adapter = SET.stateless[0]
    forwarder = Forwarder(_Upstream(stateless), adapters=SET)
    call = _call(Operation.DISCOVER, adapter.version)
    outcome = await forwarder.handle(call, Exchange(call=call, route="/r", profile=profile))
    bridged = not stateless and "tasks" in profile.capabilities
    before = adapter.encode(call, profile, Value(_old_discover(profile, bridged)))
    assert adapter.encode(call, profile, outcome) == before
    assert isinstance(outcome, Value)
    extensions = outcome.result["capabilities"].get("extensions", {})
    assert (TASKS in extensions) == bridged
    await forwarder.close()


async def test_a_call_no_adapter_decoded_is_refused() -> None:
    forwarder = Forwarder(_Upstream(), adapters=SET.only(["2025-06-18"]))
    call = Call(7, Operation.INITIALIZE, "initialize", {}, ClientContext("2025-03-26"))
    outcome = await forwarder.handle(call, Exchange(call=call, route="/r", profile=PROFILE))
    assert not isinstance(outcome, Value)
    await forwarder.close()
