"""e2e tests: make `peers.registry` importable (`from peers.registry import ...`), as
tests/interop/conftest.py does, and give each test a client session."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
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
