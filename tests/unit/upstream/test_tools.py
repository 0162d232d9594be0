"""The tool index keeps what calls need of each listed tool, not the tool: a long list
stays known whole, within a bound reckoned in bytes that holds what it says."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import orjson
import pytest
import structlog

from gateway.core import Value
from gateway.protocol.selection import AdapterSet
from gateway.upstream import tools as tool_index
from gateway.upstream.tools import PLAIN, ToolBook, ToolIndex

ADAPTERS = AdapterSet.default()
MODERN = ADAPTERS.by_version["2026-07-28"]
LEGACY = ADAPTERS.by_version["2025-11-25"]


def listed(count: int, prefix: str = "tool") -> list[dict[str, Any]]:
    """``count`` tools such as a server lists (a description, a small schema)."""
    return [
        {
            "name": f"{prefix}_{n:06d}",
            "description": f"Tool number {n}: takes a text and a count, returns them.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "Any text"},
                    "count": {"type": "integer", "minimum": 0},
                },
                "required": ["text"],
            },
        }
        for n in range(count)
    ]


def declaring(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "inputSchema": {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        },
        "execution": {"taskSupport": "optional"},
    }


@pytest.mark.parametrize(("adapter", "param_headers"), [(LEGACY, False), (MODERN, True)])
def test_a_list_of_100000_tools_is_known_whole(adapter: Any, param_headers: bool) -> None:
    index = ToolBook(MODERN).of("p")
    tools = [*listed(100_000), declaring("last")]
    index.learn(adapter, Value({"tools": tools}), param_headers=param_headers)
    assert all(index.known(f"tool_{n:06d}") is PLAIN for n in range(100_000))
    facts = index.known("last")
    assert facts is not None
    assert facts.declared == {("region",): "Region"}  # by the stateless era's rules
    assert facts.task_support == "optional"
    assert facts.param_paths == ({("region",): "Region"} if param_headers else {})
    assert index.known("never") is None  # never listed: still told apart
    assert index.size <= tool_index.MAX_INDEX_BYTES


def test_what_the_index_reckons_is_at_least_what_it_holds() -> None:
    """The bound is in reckoned bytes: the reckoning must not understate the memory."""
    raw = orjson.dumps({"tools": [*listed(20_000), *(declaring(f"d{n}") for n in range(500))]})
    book = ToolBook(MODERN)
    gc.collect()
    tracemalloc.start()
    try:
        index = book.of("p")
        index.learn(LEGACY, Value(orjson.loads(raw)), param_headers=False)
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert index.known("d499") is not None
    assert held <= index.size, (held, index.size)


def test_past_its_bound_an_index_starts_again_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tool_index, "MAX_INDEX_BYTES", 100_000)
    book = ToolBook(MODERN)
    index = book.of("p")
    with structlog.testing.capture_logs() as logs:
        for page in range(3):
            index.learn(LEGACY, Value({"tools": listed(1_000, f"p{page}")}), param_headers=False)
    assert index.size <= 100_000
    assert index.known("p2_000999") is PLAIN
    assert index.known("p0_000000") is None
    assert book.budget.restarts >= 2
    warned = [e for e in logs if "larger than the tool index's bound" in e["event"]]
    assert len(warned) == 1  # once per index, however often it starts again


def test_all_indexes_together_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_index, "MAX_BOOK_BYTES", 300_000)
    book = ToolBook(MODERN)
    for who in ("alice", "bob", "carol", "dave"):
        book.of(who).learn(LEGACY, Value({"tools": listed(1_000)}), param_headers=False)
    book.of("erin")
    assert book.budget.used <= 300_000
    assert book.known("alice", "tool_000000") is None  # the least recently used went
    assert book.known("dave", "tool_000999") is PLAIN
    book.reset()
    assert book.budget.used == 0


def test_a_tool_listed_again_is_reckoned_once() -> None:
    index = ToolIndex(MODERN)
    for _ in range(3):
        index.learn(LEGACY, Value({"tools": [*listed(10), declaring("d")]}), param_headers=False)
    once = index.size
    index.learn(LEGACY, Value({"tools": [*listed(10), declaring("d")]}), param_headers=False)
    assert index.size == once
    index.reset()
    assert index.size == 0


def test_an_index_dropped_from_its_book_no_longer_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A list still being read into an index its book dropped (a lookup holds it)
    teaches it for nothing: the book's budget does not grow for it."""
    monkeypatch.setattr(tool_index, "MAX_PRINCIPALS", 1)
    book = ToolBook(MODERN)
    dropped = book.of("alice")
    book.of("bob")
    dropped.learn(LEGACY, Value({"tools": listed(100)}), param_headers=False)
    assert dropped.known("tool_000099") is PLAIN
    assert book.budget.used == 0


def test_what_an_upstream_makes_long_is_reckoned_in_full() -> None:
    index = ToolIndex(MODERN)
    name = "工" * 50_000  # two bytes a character, as Python holds it
    tool = {**declaring(name), "execution": {"taskSupport": "x" * 100_000}}
    index.learn(LEGACY, Value({"tools": [tool]}), param_headers=False)
    assert index.size > 100_000 + 2 * 50_000
