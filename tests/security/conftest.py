"""Security tests: a fresh HTTP client per test (as tests/e2e does)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.security.harness import demo_upstream


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[str]:
    """The demo server (handshake era, elicits in `greet_me`), in its own process."""
    with demo_upstream(tmp_path) as url:
        yield url
