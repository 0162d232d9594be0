"""The layering rules: only gateway/protocol names a revision; a revision is one file."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gateway.core import (
    Call,
    ClientContext,
    Failure,
    FailureKind,
    Operation,
    Preamble,
    ServerProfile,
    ToolSpec,
    Value,
)
from gateway.protocol.selection import AdapterSet
from gateway.protocol.v2026_07_28 import Adapter2026_07_28

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gateway"
REVISION_DATE = re.compile(r"20\d\d-[01]\d-[0-3]\d")


def test_no_revision_outside_the_protocol_package() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "protocol":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if REVISION_DATE.search(line):
                offenders.append(f"gateway/{relative}:{number}: {line.strip()}")
    assert not offenders, "revision dates outside gateway/protocol:\n" + "\n".join(offenders)


def test_the_scan_finds_the_protocol_files() -> None:
    # Guard against a scan that silently looks at nothing.
    protocol = list((PACKAGE / "protocol").glob("v*.py"))
    assert len(protocol) >= 5
    assert all(REVISION_DATE.search(p.read_text(encoding="utf-8")) for p in protocol)
    assert len(list(PACKAGE.rglob("*.py"))) > len(protocol)


# -------------------------------------------- a new revision is one class

FUTURE = "2099-01-01"


class Adapter2099_01_01(Adapter2026_07_28):
    """A throwaway future revision: 2026-07-28 with one changed flag."""

    version = FUTURE
    # The one change: structured content back to objects only.
    structured_content = "object"


def future_set() -> AdapterSet:
    return AdapterSet.default().with_adapter(Adapter2099_01_01())


def future_request(method: str, params: dict[str, Any], id_: Any = 1) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": FUTURE,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "traceparent": "t",
    }
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": {**params, "_meta": meta}}


def test_new_revision_is_selected() -> None:
    adapters = future_set()
    assert adapters.versions[0] == FUTURE
    assert [a.version for a in adapters.stateless] == [FUTURE, "2026-07-28"]
    selected = adapters.select(Preamble(body=future_request("tools/list", {})))
    assert isinstance(selected, Adapter2099_01_01)
    headers = {"mcp-protocol-version": FUTURE}
    assert adapters.select(Preamble(body={"jsonrpc": "2.0"}, headers=headers)) is selected
    # The older modern revision still answers its own clients.
    modern = adapters.select(
        Preamble(body={"jsonrpc": "2.0"}, headers={"mcp-protocol-version": "2026-07-28"})
    )
    assert isinstance(modern, Adapter2026_07_28) and modern.version == "2026-07-28"
    # An unknown version now lists both stateless revisions.
    unknown = adapters.unsupported("2100-01-01", stateless=True)
    assert unknown.data["supported"] == [FUTURE, "2026-07-28"]


def test_new_revision_decodes() -> None:
    adapter = future_set().by_version[FUTURE]
    items = adapter.decode(Preamble(body=future_request("tools/call", {"name": "add"}, 9)))
    assert len(items) == 1
    call = items[0]
    assert isinstance(call, Call)
    assert call.operation is Operation.TOOLS_CALL
    assert call.client.protocol_version == FUTURE
    assert call.client.capabilities == {"elicitation": {}}
    assert call.meta == {"traceparent": "t"}
    # A 2026 request is not a 2099 request.
    old = future_request("tools/list", {})
    old["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
    failure = adapter.decode(Preamble(body=old))[0]
    assert not isinstance(failure, Call)


def test_new_revision_encodes_and_projects() -> None:
    adapter = future_set().by_version[FUTURE]
    call = Call(
        id=1,
        operation=Operation.TOOLS_CALL,
        method="tools/call",
        params={"name": "x"},
        client=ClientContext(FUTURE),
    )
    message = adapter.encode(
        call, ServerProfile(), Value({"content": [], "structuredContent": [1]})
    )
    assert message is not None
    result = message["result"]
    # The changed flag: a non-object structured result becomes a text block.
    assert "structuredContent" not in result
    assert result["content"] == [{"type": "text", "text": "[1]"}]
    assert result["resultType"] == "complete"
    spec = ToolSpec.model_validate(
        {"name": "t", "title": "T", "outputSchema": {"type": "array"}, "icons": []}
    )
    tool = adapter.describe_tool(spec)
    assert tool is not None
    assert "outputSchema" not in tool
    assert tool["title"] == "T"
    assert adapter.error_code(Failure(FailureKind.MISSING_CAPABILITY, "m")) == -32021
    headers = adapter.client_headers(call, None)
    assert headers["MCP-Protocol-Version"] == FUTURE
    upstream = adapter.client_request(call, 5)
    assert upstream["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == FUTURE


def test_the_default_set_is_untouched() -> None:
    future_set()
    assert FUTURE not in AdapterSet.default().by_version


# ----------------------------------------------------------- import-linter


def test_import_contracts() -> None:
    # Mandatory: a missing import-linter fails the suite rather than skipping the contracts.
    executable = Path(sys.executable).parent / "lint-imports"
    found = str(executable) if executable.exists() else shutil.which("lint-imports")
    assert found is not None, "lint-imports is not installed: the layering goes unchecked"
    command = [found]
    completed = subprocess.run(
        [*command, "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASK_UPSTREAM = ServerProfile(capabilities={"tasks": {"requests": {"tools": {"call": {}}}}})


@pytest.mark.parametrize(
    "capabilities",
    [{}, {"elicitation": {}}, {"extensions": {TASKS_EXTENSION: {}}}],
    ids=["plain", "eliciting", "tasks"],
)
def test_new_revision_projects_for_every_client_role(capabilities: dict[str, Any]) -> None:
    """A subclass's own projections reach every kind of client, a tasks client too
    (not its parent's: 2099 keeps object-rooted output schemas only)."""
    adapter = future_set().by_version[FUTURE]
    call = Call(
        id=1,
        operation=Operation.TOOLS_LIST,
        method="tools/list",
        params={},
        client=ClientContext(FUTURE, capabilities),
    )
    tools = [
        {"name": "a", "inputSchema": {"type": "object"}, "outputSchema": {"type": "array"}},
        {
            "name": "b",
            "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "required"},
        },
    ]
    message = adapter.encode(call, TASK_UPSTREAM, Value({"tools": tools}))
    assert message is not None
    listed = {tool["name"]: tool for tool in message["result"]["tools"]}
    assert "outputSchema" not in listed["a"]
    # Task-only tools: offered to a tasks client (the gateway runs its tasks), not others.
    assert ("b" in listed) == (TASKS_EXTENSION in capabilities.get("extensions", {}))
    # The parent revision is untouched: it keeps the array schema for the same client.
    modern = future_set().by_version["2026-07-28"]
    parent = modern.encode(
        replace(call, client=ClientContext("2026-07-28", capabilities)),
        TASK_UPSTREAM,
        Value({"tools": tools}),
    )
    assert parent is not None
    assert parent["result"]["tools"][0]["outputSchema"] == {"type": "array"}
