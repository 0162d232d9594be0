"""The smaller findings, one class at a time: quotas, the Origin guard, log fields,
the stdio carrier's timeout and /readyz for stdio routes."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import aiohttp
import pytest

from gateway.auth.discovery import MAX_CACHED, DocumentFetcher
from gateway.core import (
    Call,
    ClientContext,
    Exchange,
    FailureKind,
    Operation,
    ServerProfile,
    Value,
)
from gateway.core.limits import DescriptorBudget, Quota
from gateway.observability import MAX_LOG_FIELD, Metrics, truncate_fields
from gateway.protocol.selection import AdapterSet
from gateway.transport.guard import OriginGuard
from gateway.upstream import tools as tool_index
from gateway.upstream.carriers.base import CarrierError
from gateway.upstream.carriers.stdio import StdioCarrier
from gateway.upstream.link import UpstreamLink
from gateway.upstream.reach import spawnable
from gateway.upstream.settings import UpstreamSettings
from gateway.upstream.tools import MAX_PRINCIPALS, PLAIN, ToolBook, ToolIndex
from tests.security.harness import gateway


def test_a_quota_refuses_per_principal_then_in_all_and_counts_releases() -> None:
    quota = Quota("things", per_principal=2, total=3)
    assert quota.acquire("a") is None and quota.acquire("a") is None
    mine = quota.acquire("a")
    assert mine is not None and mine.kind is FailureKind.QUOTA_EXCEEDED
    assert quota.acquire("b") is None
    full = quota.acquire("c")
    assert full is not None and full.kind is FailureKind.OVERLOADED
    quota.release("a")
    assert quota.acquire("c") is None and len(quota) == 3
    quota.release("nobody")  # never taken: nothing changes
    assert len(quota) == 3


def test_loopback_origins_only_for_loopback_listeners() -> None:
    origin = {"origin": "http://localhost:9999", "host": "localhost:8080"}
    assert OriginGuard(loopback_only=True).check(origin) is None
    refused = OriginGuard(loopback_only=False).check(origin)
    assert refused is not None and refused.kind is FailureKind.FORBIDDEN
    listed = OriginGuard(loopback_only=False, allowed_origins=["http://localhost:9999"])
    assert listed.check(origin) is None


def test_log_fields_are_truncated() -> None:
    event = {"event": "call", "method": "m" * 4_000_000, "data": {"k": "v" * 5000}, "n": 3}
    out = truncate_fields(None, "info", event)
    assert len(out["method"]) < MAX_LOG_FIELD + 64 and out["method"].endswith("more)")
    assert isinstance(out["data"], str) and len(out["data"]) < MAX_LOG_FIELD + 64
    assert out["n"] == 3


def test_the_descriptor_budget_says_when_too_few_are_left() -> None:
    assert not DescriptorBudget(reserve=0).exhausted()
    assert DescriptorBudget(reserve=DescriptorBudget.limit()).exhausted()


async def test_a_silent_stdio_server_times_out() -> None:
    """stdio routes honour timeout= (the carrier's read_timeout), as HTTP ones do."""
    silent = [sys.executable, "-c", "import time; time.sleep(60)"]
    carrier = StdioCarrier(silent, read_timeout=0.3, close_timeout=0.2, term_timeout=0.5)
    try:
        await carrier.start()
        exchange = await carrier.request({"jsonrpc": "2.0", "id": 1, "method": "ping"}, {})
        with pytest.raises(CarrierError) as caught:
            async with asyncio.timeout(5):
                async for _ in exchange.messages:
                    pass
        assert caught.value.timeout
    finally:
        await carrier.close()


def test_a_stdio_command_is_ready_when_it_can_be_spawned(tmp_path: Path) -> None:
    spawnable([sys.executable], None)
    spawnable(["sh", "-c", "true"], str(tmp_path))
    with pytest.raises(OSError):
        spawnable(["no-such-program-anywhere"], None)
    with pytest.raises(OSError):
        spawnable([sys.executable], str(tmp_path / "missing"))


async def test_readyz_is_200_for_a_stdio_route(tmp_path: Path, upstream: str) -> None:
    """It used to try port 80 of an empty URL: always 503."""
    command = f"stdio:{sys.executable} -m gateway stdio --upstream {upstream}"
    with gateway(tmp_path, command) as gw:
        async with aiohttp.ClientSession() as http:
            for _ in range(2):  # the first probes; the second checks the command
                async with http.get(gw.base + "/readyz") as resp:
                    body = await resp.json()
                    assert resp.status == 200, body


def test_metrics_remember_no_long_method_names() -> None:
    """The label shortcut table is keyed by what the record says: a flood of distinct
    megabyte-long method names must not be kept (they all count as ``other``)."""
    metrics = Metrics()
    long = "x" * (1 << 20)
    for n in range(64):
        metrics.observe(
            {
                "route": "/mcp",
                "method": f"{n}{long}",
                "client_revision": "2025-11-25",
                "upstream_revision": "2025-11-25",
                "outcome": "ok",
            }
        )
    kept = sum(len(str(part)) for given in metrics._seen for part in given)
    assert kept < 64 * 1024, kept
    text = metrics.render().decode()
    assert 'method="other"' in text and "xxxx" not in text


async def test_the_pool_key_cache_keeps_no_huge_capability_declarations() -> None:
    """A stateless client's capabilities pick its shared upstream session; the cache
    of their digests must not keep a flood of megabyte-long declarations."""
    adapter = AdapterSet.default().by_version["2025-11-25"]
    async with aiohttp.ClientSession() as http:
        link = UpstreamLink(UpstreamSettings("http://127.0.0.1:9/mcp"), AdapterSet.default(), http)
        try:
            for n in range(64):
                client = ClientContext("2026-07-28", capabilities={"x": {str(n): "y" * (1 << 20)}})
                call = Call(1, Operation.TOOLS_CALL, "tools/call", {}, client)
                exchange = Exchange(call=call, route="/mcp", profile=ServerProfile())
                assert link._session_key(exchange, adapter).startswith("p:anonymous:")
            assert sum(len(raw) for _, raw in link._digests) < 64 * 1024
        finally:
            await link.close()


async def test_the_discovery_cache_is_bounded() -> None:
    """Metadata URLs come from an upstream's challenges: a new one each time must not
    grow the cache without end (none of these is fetched: not http)."""
    async with aiohttp.ClientSession() as http:
        fetcher = DocumentFetcher(http)
        for n in range(MAX_CACHED * 3):
            assert await fetcher.get(f"file:///metadata/{n}") is None
        assert len(fetcher._cache) == MAX_CACHED
        assert f"file:///metadata/{MAX_CACHED * 3 - 1}" in fetcher._cache


def test_the_tool_index_is_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_index, "MAX_INDEX_BYTES", 50_000)
    index = ToolIndex()
    adapter = AdapterSet.default().by_version["2025-11-25"]
    for page in range(6):
        tools = [{"name": f"t{page}-{n}", "inputSchema": {}} for n in range(200)]
        index.learn(adapter, Value({"tools": tools}), param_headers=False)
        assert index.size <= 50_000
    assert index.known("t5-199") is PLAIN  # the newest are known; the oldest went
    assert index.known("t0-0") is None


def test_each_principal_has_a_tool_index_of_its_own_and_they_are_bounded() -> None:
    book = ToolBook()
    book.of("alice")._tools["secret"] = PLAIN
    assert book.known("alice", "secret") is not None
    assert book.known("bob", "secret") is None
    assert book.known("carol", "anything") is None and len(book._indexes) == 1
    for n in range(MAX_PRINCIPALS + 5):
        book.of(f"p{n}")
    assert len(book._indexes) == MAX_PRINCIPALS
    assert book.known("alice", "secret") is None  # the least recently used went
