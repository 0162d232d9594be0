"""e2e tests: make `peers.registry` importable (`from peers.registry import ...`), as
tests/interop/conftest.py does, and give each test a client session."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

_INTEROP = str(Path(__file__).resolve().parents[1] / "interop")
if _INTEROP not in sys.path:
    sys.path.insert(0, _INTEROP)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """A raw HTTP client; a fresh connection pool per test."""
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def dead_url() -> Iterator[str]:
    """An upstream URL where connections are refused for the whole test: its port is
    held by this process (bound, never listening), so nothing else can take it."""
    from tests.e2e.gateway_proc import HeldPort

    with HeldPort() as held:
        yield f"http://127.0.0.1:{held.port}/mcp"
