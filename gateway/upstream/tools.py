"""What the gateway learns from an upstream's tool list, tool by tool.

Two things about a tool shape how it is called: which arguments a stateless
HTTP upstream wants mirrored into Mcp-Param-* headers, and whether a
handshake-era tool runs as a task (`execution.taskSupport`).  Both come from
tools/list: every list that passes through teaches the index, and a call
for a tool the index never saw reads the whole list once.

An upstream may list different tools to different callers (by their token's
scopes, say): each principal has an index of its own, taught only by the lists
read with its own credentials.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from gateway.core import Call, Operation, Outcome, Value
from gateway.protocol import Adapter
from gateway.upstream.calls import read_pages

log = structlog.get_logger(__name__)

# Tools one principal's index remembers at once: lists that rename tools again and
# again would grow it for ever; past the bound it starts again (the next unknown
# tool re-reads).  Principals with an index at once: the least recently used goes.
MAX_TOOLS = 2_000
MAX_PRINCIPALS = 128


@dataclass(frozen=True)
class ToolFacts:
    # The Mcp-Param-* header for each argument path (stateless HTTP upstreams only).
    param_paths: dict[tuple[str, ...], str]
    # The tool's `execution.taskSupport`, if it says.
    task_support: str | None
    # The tool as listed (the inbound side checks a call's headers against it).
    listed: dict[str, Any]


class ToolIndex:
    """The facts of every tool the upstream listed."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolFacts] = {}
        self._listed = False

    def reset(self) -> None:
        """Forget everything (the upstream is no longer what listed these tools)."""
        self._tools.clear()
        self._listed = False

    def learn(self, adapter: Adapter, outcome: Value, *, param_headers: bool) -> Value:
        """Remember what one page of tools/list says.  With ``param_headers``, a tool
        whose header annotations break the rules is dropped from the page, as an HTTP
        client of the stateless era must."""
        tools = outcome.result.get("tools")
        if not isinstance(tools, list):
            return outcome
        kept = []
        for tool in tools:
            name = tool.get("name") if isinstance(tool, dict) else None
            paths = _param_paths(adapter, tool) if param_headers else {}
            if paths is None:
                log.warning("dropping a tool with an invalid x-mcp-header", tool=name)
                continue
            if isinstance(name, str):
                if len(self._tools) >= MAX_TOOLS and name not in self._tools:
                    self.reset()
                self._tools[name] = ToolFacts(paths, _task_support(tool), tool)
            kept.append(tool)
        return Value({**outcome.result, "tools": kept}) if len(kept) != len(tools) else outcome

    def known(self, name: str) -> ToolFacts | None:
        """The facts of a tool a list that passed through named (no list is read)."""
        return self._tools.get(name)

    async def lookup(
        self, call: Call, run: Callable[[Call], Awaitable[Outcome]]
    ) -> ToolFacts | None:
        """The facts of the tool ``call`` names.  A tool never seen makes the index read
        the whole list, once, with ``run`` (which must teach this index what it reads)."""
        name = call.params.get("name")
        if not isinstance(name, str):
            return None
        if name not in self._tools and not self._listed:
            self._listed = True
            async for _ in read_pages(Operation.TOOLS_LIST, call.client, run):
                pass
        return self._tools.get(name)


class ToolBook:
    """One :class:`ToolIndex` per principal, the least recently used dropped past
    MAX_PRINCIPALS (its next call reads the list again)."""

    def __init__(self) -> None:
        self._indexes: OrderedDict[str, ToolIndex] = OrderedDict()

    def of(self, principal: str) -> ToolIndex:
        index = self._indexes.get(principal)
        if index is None:
            if len(self._indexes) >= MAX_PRINCIPALS:
                self._indexes.popitem(last=False)
            index = self._indexes[principal] = ToolIndex()
        else:
            self._indexes.move_to_end(principal)
        return index

    def known(self, principal: str, name: str) -> ToolFacts | None:
        """Without making room: a lookup that finds nothing leaves nothing behind."""
        index = self._indexes.get(principal)
        return index.known(name) if index is not None else None

    def reset(self) -> None:
        self._indexes.clear()


def _param_paths(adapter: Adapter, tool: Any) -> dict[tuple[str, ...], str] | None:
    return adapter.client_param_paths(tool) if isinstance(tool, dict) else {}


def _task_support(tool: Any) -> str | None:
    execution = tool.get("execution") if isinstance(tool, dict) else None
    support = execution.get("taskSupport") if isinstance(execution, dict) else None
    return support if isinstance(support, str) else None
