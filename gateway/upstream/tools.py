"""What the gateway learns from an upstream's tool list, tool by tool.

Two things about a tool shape how it is called: which arguments a stateless
HTTP upstream wants mirrored into Mcp-Param-* headers (and which ones a
stateless client's call must carry, checked on the way in), and whether a
handshake-era tool runs as a task (`execution.taskSupport`).  Both come from
tools/list: every list that passes through teaches the index, and a call
for a tool the index never saw reads the whole list once.

Only those facts are kept, not the tools: most tools say nothing of either, and
all of those share one record, so an index costs little more than its tools'
names.  Its size is reckoned as it grows and bounded in bytes, per principal and
for all of them, against an upstream that lists without end.

An upstream may list different tools to different callers (by their token's
scopes, say): each principal has an index of its own, taught only by the lists
read with its own credentials.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import structlog

from gateway.core import Call, Operation, Outcome, Value
from gateway.protocol import Adapter
from gateway.upstream.calls import read_pages
from gateway.upstream.retry import safe_tool

log = structlog.get_logger(__name__)

# The bytes one principal's index may reckon (a list larger than that starts it
# again as it is read: a tool past the bound goes unchecked, as one never listed),
# and all principals' indexes together (the least recently used go first); and
# principals with an index at once.
MAX_INDEX_BYTES = 16 * 1024 * 1024
MAX_BOOK_BYTES = 64 * 1024 * 1024
MAX_PRINCIPALS = 128
# What an index is reckoned to hold per tool besides its name (the table's slot),
# and per record of facts and per header parameter in it, besides their strings.
ENTRY_BYTES = 80
FACTS_BYTES = 200
PARAM_BYTES = 160

Paths = dict[tuple[str, ...], str]


@dataclass(frozen=True, slots=True)
class ToolFacts:
    # The Mcp-Param-* header for each argument path (stateless HTTP upstreams only).
    param_paths: Paths
    # The tool's `execution.taskSupport`, if it says.
    task_support: str | None
    # The header parameters the tool declares, which a stateless client's call must
    # mirror (checked on the way in; empty: none, or annotations that break the rules).
    declared: Paths
    # Its annotations say running it twice does no harm (readOnlyHint, idempotentHint):
    # a failed call may be sent again (upstream/retry.py).
    safe: bool = False


# Every listed tool that says nothing of headers or tasks.
PLAIN = ToolFacts({}, None, {})


class Budget:
    """Bytes reckoned by a book's indexes together."""

    def __init__(self) -> None:
        self.used = 0
        self.restarts = 0  # indexes started again past their bound (a metric)


class ToolIndex:
    """The facts of every tool the upstream listed."""

    def __init__(self, rules: Adapter | None = None, budget: Budget | None = None) -> None:
        self._tools: dict[str, ToolFacts] = {}
        self._listed = False
        # Whose rules say which headers a tool declares (a stateless revision's).
        self._rules = rules
        self._budget = budget if budget is not None else Budget()
        self.size = 0  # bytes reckoned
        self._warned = False

    def reset(self) -> None:
        """Forget everything (the upstream is no longer what listed these tools)."""
        self._tools.clear()
        self._listed = False
        self._grow(-self.size)

    def leave(self) -> None:
        """Forget everything and stop counting against the book's budget (a list still
        being read into this index, dropped from its book, teaches it for nothing)."""
        self.reset()
        self._budget = Budget()

    def _grow(self, size: int) -> None:
        self.size += size
        self._budget.used += size

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
                same_rules = param_headers and adapter is self._rules
                self._remember(name, self._facts(tool, paths, same_rules))
            kept.append(tool)
        return Value({**outcome.result, "tools": kept}) if len(kept) != len(tools) else outcome

    def _facts(self, tool: dict[str, Any], paths: Paths, same_rules: bool) -> ToolFacts:
        """``same_rules``: ``paths`` were worked out by the rules that say what a tool
        declares, so they are what it declares."""
        task_support = _task_support(tool)
        rules = self._rules
        declared: Paths | None = {}
        if same_rules:
            declared = paths
        elif rules is not None and _annotated(tool):
            declared = rules.client_param_paths(tool)
        safe = safe_tool(tool)
        if not (paths or task_support or declared or safe):
            return PLAIN
        return ToolFacts(paths, task_support, declared or {}, safe)

    def _remember(self, name: str, facts: ToolFacts) -> None:
        size = _reckon(name, facts)
        old = self._tools.get(name)
        if old is not None:
            size -= _reckon(name, old)
        elif self.size + size > MAX_INDEX_BYTES:
            self._overflow()
        self._tools[name] = facts
        self._grow(size)

    def _overflow(self) -> None:
        """Past the bound: start again (said once per index, counted every time)."""
        self._budget.restarts += 1
        if not self._warned:
            self._warned = True
            log.warning(
                "a tool list is larger than the tool index's bound: it starts again, and "
                "tools it forgot go unchecked (Mcp-Param headers, taskSupport) until listed",
                tools=len(self._tools),
                bound_bytes=MAX_INDEX_BYTES,
            )
        listed = self._listed
        self.reset()
        self._listed = listed

    def unread(self, name: str) -> bool:
        """Whether a lookup of ``name`` now would read the list."""
        return name not in self._tools and not self._listed

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
        if self.unread(name):
            self._listed = True
            async for _ in read_pages(Operation.TOOLS_LIST, call.client, run):
                pass
        return self._tools.get(name)


class ToolBook:
    """One :class:`ToolIndex` per principal, the least recently used dropped past
    MAX_PRINCIPALS or MAX_BOOK_BYTES (its next call reads the list again)."""

    def __init__(self, rules: Adapter | None = None) -> None:
        self._indexes: OrderedDict[str, ToolIndex] = OrderedDict()
        self._rules = rules
        self.budget = Budget()

    def of(self, principal: str) -> ToolIndex:
        index = self._indexes.get(principal)
        if index is None:
            if len(self._indexes) >= MAX_PRINCIPALS:
                self._drop_oldest()
            index = self._indexes[principal] = ToolIndex(self._rules, self.budget)
        else:
            self._indexes.move_to_end(principal)
        # Checked as an index is asked for: all of them may pass the bound by at most
        # what one index grows by in between (MAX_INDEX_BYTES).
        while self.budget.used > MAX_BOOK_BYTES and len(self._indexes) > 1:
            self._drop_oldest()
        return index

    def _drop_oldest(self) -> None:
        _, index = self._indexes.popitem(last=False)
        index.leave()

    def known(self, principal: str, name: str) -> ToolFacts | None:
        """Without making room: a lookup that finds nothing leaves nothing behind (one
        that finds the index keeps it recent, as ``of`` does)."""
        index = self._indexes.get(principal)
        if index is None:
            return None
        self._indexes.move_to_end(principal)
        return index.known(name)

    def reset(self) -> None:
        for index in self._indexes.values():
            index.leave()
        self._indexes.clear()


def _param_paths(adapter: Adapter, tool: Any) -> dict[tuple[str, ...], str] | None:
    return adapter.client_param_paths(tool) if isinstance(tool, dict) else {}


def _task_support(tool: Any) -> str | None:
    execution = tool.get("execution") if isinstance(tool, dict) else None
    support = execution.get("taskSupport") if isinstance(execution, dict) else None
    return support if isinstance(support, str) else None


def _annotated(tool: dict[str, Any]) -> bool:
    """Whether a tool's input schema may declare a header parameter: looked for in its
    bytes (a fraction of walking the schema, which only such a tool then gets)."""
    schema = tool.get("inputSchema")
    if not schema:
        return False
    try:
        return b"x-mcp-header" in orjson.dumps(schema)
    except TypeError:  # not JSON (an integer too large for orjson): walked instead
        return True


def _reckon(name: str, facts: ToolFacts) -> int:
    """Bytes an index holds for one tool (see ENTRY_BYTES); its strings, whose length an
    upstream chose, counted as they are held."""
    size = ENTRY_BYTES + sys.getsizeof(name)
    if facts is PLAIN:
        return size
    size += FACTS_BYTES + sys.getsizeof(facts.task_support)
    shared = facts.param_paths is facts.declared  # worked out once, kept once
    for paths in (facts.param_paths,) if shared else (facts.param_paths, facts.declared):
        for path, header in paths.items():
            size += PARAM_BYTES + sys.getsizeof(header) + sum(map(sys.getsizeof, path))
    return size
