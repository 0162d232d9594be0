"""Third-party MCP servers (pinned npm packages) against the official-SDK client drivers.

Makes `peers.registry` / `peers.thirdparty` importable, as tests/interop/conftest.py does,
and starts each HTTP server-everything once per module (every client gets its own
session there: its roots are cached per session id).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

_INTEROP = str(Path(__file__).resolve().parents[1] / "interop")
if _INTEROP not in sys.path:
    sys.path.insert(0, _INTEROP)

from peers.thirdparty import (  # noqa: E402
    SERVER_EVERYTHING,
    require_installed,
    running_thirdparty,
)


@pytest.fixture(scope="module")
def everything_urls() -> Iterator[dict[str, str]]:
    """server-everything over Streamable HTTP and over HTTP+SSE: transport -> URL."""
    require_installed(SERVER_EVERYTHING)
    with ExitStack() as stack:
        urls = {}
        for transport in ("streamable-http", "sse"):
            url = stack.enter_context(running_thirdparty(SERVER_EVERYTHING, transport))
            assert isinstance(url, str)
            urls[transport] = url
        yield urls


@pytest.fixture(scope="module")
def root_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Existing directories (server-filesystem accepts only those), resolved: `start` is
    server-filesystem's command-line directory, `a`/`b` a client's roots before/after the
    change, `a2`/`b2` a second client's."""
    base = tmp_path_factory.mktemp("roots").resolve()
    dirs = {}
    for name in ("start", "a", "b", "a2", "b2"):
        dirs[name] = base / f"root-{name}"
        dirs[name].mkdir()
    return dirs
