"""Exposure of one route, unit by unit: which calls are refused (and how), and lists
filtered with their pages refilled (a page source stands in for the upstream here;
tests/thirdparty/test_policy.py runs the same through real SDK clients and servers)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import Call, ClientContext, Failure, FailureKind, Operation, Outcome, Value
from gateway.policy import Exposure, Rule
from gateway.policy.exposure import MAX_REFILL_PAGES
from gateway.protocol import AdapterSet

ADAPTERS = AdapterSet.default()
MODERN = ADAPTERS.by_version["2026-07-28"]
LEGACY = ADAPTERS.by_version["2025-06-18"]


def call(op: Operation, params: dict[str, Any], adapter: Any = LEGACY) -> Call:
    client = ClientContext(protocol_version=adapter.version, adapter=adapter)
    return Call(1, op, op.value, params, client)


EXPOSURE = Exposure(
    tools=Rule.parse("allow:search_*|read_file"),
    prompts=Rule.parse("deny:secret_*"),
    resources=Rule.parse("allow:file:///public/*|demo://items/{id}"),
)


@pytest.mark.parametrize(
    ("op", "params", "kind", "message"),
    [
        (
            Operation.TOOLS_CALL,
            {"name": "delete_all"},
            FailureKind.INVALID_PARAMS,
            "Unknown tool: delete_all",
        ),
        (Operation.TOOLS_CALL, {}, FailureKind.INVALID_PARAMS, "Unknown tool: None"),
        (
            Operation.PROMPTS_GET,
            {"name": "secret_plan"},
            FailureKind.INVALID_PARAMS,
            "Unknown prompt: secret_plan",
        ),
        (
            Operation.RESOURCES_READ,
            {"uri": "file:///etc/passwd"},
            FailureKind.RESOURCE_NOT_FOUND,
            "Resource not found",
        ),
        (
            Operation.RESOURCES_SUBSCRIBE,
            {"uri": "file:///etc/x"},
            FailureKind.RESOURCE_NOT_FOUND,
            "Resource not found",
        ),
        (
            Operation.RESOURCES_UNSUBSCRIBE,
            {"uri": "file:///etc/x"},
            FailureKind.RESOURCE_NOT_FOUND,
            "Resource not found",
        ),
        (
            Operation.COMPLETE,
            {"ref": {"type": "ref/prompt", "name": "secret_plan"}, "argument": {}},
            FailureKind.INVALID_PARAMS,
            "Unknown prompt: secret_plan",
        ),
        (
            Operation.COMPLETE,
            {"ref": {"type": "ref/resource", "uri": "file:///etc/{name}"}, "argument": {}},
            FailureKind.INVALID_PARAMS,
            "Unknown resource: file:///etc/{name}",
        ),
    ],
)
def test_hidden_names_are_refused_as_unknown(
    op: Operation, params: dict[str, Any], kind: FailureKind, message: str
) -> None:
    refused = EXPOSURE.refusal(call(op, params))
    assert isinstance(refused, Failure)
    assert (refused.kind, refused.message) == (kind, message)


@pytest.mark.parametrize(
    ("op", "params"),
    [
        (Operation.TOOLS_CALL, {"name": "search_docs", "arguments": {}}),
        (Operation.PROMPTS_GET, {"name": "greet"}),
        (Operation.RESOURCES_READ, {"uri": "file:///public/a.txt"}),
        (Operation.COMPLETE, {"ref": {"type": "ref/prompt", "name": "greet"}}),
        (Operation.COMPLETE, {"ref": {"type": "ref/resource", "uri": "demo://items/{id}"}}),
        (Operation.COMPLETE, {"ref": "not an object"}),
        (Operation.TOOLS_LIST, {}),
        (Operation.PING, {}),
    ],
)
def test_exposed_names_pass(op: Operation, params: dict[str, Any]) -> None:
    assert EXPOSURE.refusal(call(op, params)) is None


def test_a_missing_resource_names_its_uri_cut_short() -> None:
    refused = EXPOSURE.refusal(call(Operation.RESOURCES_READ, {"uri": "x" * 5000}))
    assert isinstance(refused, Failure)
    assert refused.data == {"uri": "x" * 200 + "..."}


def test_a_listen_on_a_hidden_resource_is_refused() -> None:
    wanted = {"notifications": {"resourceSubscriptions": ["file:///public/a", "file:///etc/x"]}}
    refused = EXPOSURE.refusal(call(Operation.LISTEN, wanted, MODERN))
    assert isinstance(refused, Failure) and refused.data == {"uri": "file:///etc/x"}
    fine = {
        "notifications": {"resourceSubscriptions": ["file:///public/a"], "toolsListChanged": True}
    }
    assert EXPOSURE.refusal(call(Operation.LISTEN, fine, MODERN)) is None


def test_a_kind_without_a_rule_is_exposed_whole() -> None:
    tools_only = Exposure(tools=Rule.parse("deny:x"))
    assert tools_only.refusal(call(Operation.PROMPTS_GET, {"name": "secret_plan"})) is None
    assert tools_only.refusal(call(Operation.RESOURCES_READ, {"uri": "file:///etc/x"})) is None
    assert not tools_only.filters(call(Operation.PROMPTS_LIST, {}))
    assert tools_only.filters(call(Operation.TOOLS_LIST, {}))
    assert not Exposure()


class Pages:
    """A paginating list: ``names`` in pages of ``size``, the cursor the next index."""

    def __init__(self, names: list[str], size: int, key: str = "tools", field: str = "name"):
        self.names, self.size, self.key, self.field = names, size, key, field
        self.read: list[str | None] = []
        self.fail_at: str | None = None

    async def __call__(self, page: Call) -> Outcome:
        cursor = page.params.get("cursor")
        self.read.append(cursor)
        if cursor is not None and cursor == self.fail_at:
            return Failure(FailureKind.UPSTREAM_UNAVAILABLE, "gone")
        start = int(cursor or 0)
        items = [{self.field: n} for n in self.names[start : start + self.size]]
        result: dict[str, Any] = {self.key: items, "ttlMs": 5}
        if start + self.size < len(self.names):
            result["nextCursor"] = str(start + self.size)
        return Value(result)


async def read_all(exposure: Exposure, op: Operation, pages: Pages) -> tuple[list[str], int]:
    """Every page as a client reads them: the names, and how many requests it made."""
    names: list[str] = []
    cursor: str | None = None
    for requests in range(1, 100):
        outcome = await exposure.list(call(op, {"cursor": cursor} if cursor else {}), pages)
        assert isinstance(outcome, Value)
        names += [item[pages.field] for item in outcome.result[pages.key]]
        assert outcome.result["ttlMs"] == 5  # the first page's other fields are kept
        cursor = outcome.result.get("nextCursor")
        if not cursor:
            return names, requests
    raise AssertionError("the pages never ended")


async def test_a_thinned_page_is_refilled_and_every_allowed_item_comes_once() -> None:
    names = [f"t{i:02}" for i in range(40)]
    rule = "allow:t0*|t13|t3?"  # 10 + 1 + 10 of 40, clustered at both ends
    pages = Pages(names, size=4)
    got, requests = await read_all(Exposure(tools=Rule.parse(rule)), Operation.TOOLS_LIST, pages)
    expected = [n for n in names if Rule.parse(rule).allows(n)]
    assert got == expected  # each once, in the upstream's order
    assert requests < len(pages.read)  # pages were read ahead to refill
    assert len(pages.read) == 10  # every upstream page exactly once


async def test_resources_and_templates_are_filtered_by_uri_and_template() -> None:
    exposure = Exposure(resources=Rule.parse("deny:secret://*"))
    uris = ["secret://a", "demo://b", "secret://c", "demo://d"]
    got, _ = await read_all(exposure, Operation.RESOURCES_LIST, Pages(uris, 2, "resources", "uri"))
    assert got == ["demo://b", "demo://d"]
    templates = Pages(["secret://{x}", "demo://{y}"], 5, "resourceTemplates", "uriTemplate")
    got, _ = await read_all(exposure, Operation.RESOURCES_TEMPLATES_LIST, templates)
    assert got == ["demo://{y}"]


async def test_a_list_with_nothing_allowed_ends_empty() -> None:
    pages = Pages([f"t{i}" for i in range(10)], size=3)
    got, _ = await read_all(Exposure(tools=Rule.parse("allow:none")), Operation.TOOLS_LIST, pages)
    assert got == []


async def test_refilling_reads_a_bounded_number_of_pages() -> None:
    pages = Pages([f"t{i:03}" for i in range(200)] + ["keep"], size=1)
    exposure = Exposure(tools=Rule.parse("allow:keep"))
    first = await exposure.list(call(Operation.TOOLS_LIST, {}), pages)
    assert isinstance(first, Value)
    assert first.result["tools"] == []
    assert first.result["nextCursor"] == str(MAX_REFILL_PAGES)
    assert len(pages.read) == MAX_REFILL_PAGES


async def test_a_failed_refill_hands_back_the_cursor_that_failed() -> None:
    pages = Pages([f"t{i}" for i in range(9)], size=3)
    pages.fail_at = "3"
    exposure = Exposure(tools=Rule.parse("allow:t0|t5"))
    first = await exposure.list(call(Operation.TOOLS_LIST, {}), pages)
    assert isinstance(first, Value)
    assert first.result == {"tools": [{"name": "t0"}], "ttlMs": 5, "nextCursor": "3"}
    # The client's next request meets the failure itself.
    again = await exposure.list(call(Operation.TOOLS_LIST, {"cursor": "3"}), pages)
    assert isinstance(again, Failure)


async def test_a_failed_list_passes_as_it_came() -> None:
    pages = Pages(["a"], size=1)
    pages.fail_at = "0"
    exposure = Exposure(tools=Rule.parse("allow:*"))
    outcome = await exposure.list(call(Operation.TOOLS_LIST, {"cursor": "0"}), pages)
    assert isinstance(outcome, Failure)
