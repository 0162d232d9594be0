"""Third-party MCP servers pinned for interop tests (not written by the team).

They come from the npm tree of ``tests/interop/peers/node`` (exact pins in its
package.json + lock, installed by ``tests/interop/peers/node/install``) and have
their own command lines, so they are not contract peers (``registry.PEERS``)::

    from peers.thirdparty import SERVER_FILESYSTEM, SERVER_EVERYTHING, running_thirdparty

- ``@modelcontextprotocol/server-filesystem``: stdio only;
  ``node dist/index.js [allowed dir ...]``.  With a client that declares roots it asks
  ``roots/list`` right after ``notifications/initialized`` and on every
  ``notifications/roots/list_changed``, and the roots replace its allowed directories
  (existing directories only); tool ``list_allowed_directories`` names them, one path a line.
- ``@modelcontextprotocol/server-everything``: ``node dist/index.js stdio|sse|streamableHttp``,
  HTTP port from the ``PORT`` environment variable (all interfaces); Streamable HTTP at
  ``/mcp`` (stateful), HTTP+SSE at ``/sse`` (POST ``/message``).  350 ms after
  ``notifications/initialized`` it asks ``roots/list`` (if the client declares roots),
  again on ``notifications/roots/list_changed``; tool ``get-roots-list`` (registered only
  for clients with roots) names the cached roots by URI.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .registry import (
    ALLOW_MISSING_ENV,
    INSTALL_HINT,
    READY_TIMEOUT,
    ROOT,
    Transport,
    _port_open,
    _stop,
    _tail,
    free_port,
)

NODE_MODULES = Path(__file__).resolve().parent / "node" / "node_modules"


@dataclass(frozen=True)
class ThirdPartyServer:
    name: str
    package: str
    transports: tuple[Transport, ...]
    roots_tool: str
    """The tool that says which roots (or allowed directories) the server holds."""

    @property
    def entry(self) -> Path:
        return NODE_MODULES / self.package / "dist" / "index.js"

    @property
    def version(self) -> str:
        manifest = NODE_MODULES / self.package / "package.json"
        return str(json.loads(manifest.read_text())["version"])

    @property
    def missing(self) -> str | None:
        if shutil.which("node") is None:
            return f"{self.name}: node is not on PATH"
        if not self.entry.exists():
            return f"{self.name}: {self.entry} is missing; {INSTALL_HINT}"
        return None

    def argv(self, transport: Transport, args: Sequence[str] = ()) -> list[str]:
        if self.name == "server-everything":
            mode = {"stdio": "stdio", "sse": "sse", "streamable-http": "streamableHttp"}
            return ["node", str(self.entry), mode[transport], *args]
        assert transport == "stdio", f"{self.name} speaks stdio only"
        return ["node", str(self.entry), *args]


SERVER_FILESYSTEM = ThirdPartyServer(
    "server-filesystem",
    "@modelcontextprotocol/server-filesystem",
    ("stdio",),
    "list_allowed_directories",
)
SERVER_EVERYTHING = ThirdPartyServer(
    "server-everything",
    "@modelcontextprotocol/server-everything",
    ("streamable-http", "sse", "stdio"),
    "get-roots-list",
)
THIRD_PARTY = (SERVER_FILESYSTEM, SERVER_EVERYTHING)


def require_installed(*servers: ThirdPartyServer) -> None:
    """Fail, naming the server and the install command, when it is not installed (skip
    only under the local opt-out, as `registry.require_installed`)."""
    import pytest

    missing = [s.missing for s in servers if s.missing]
    if not missing:
        return
    if os.environ.get(ALLOW_MISSING_ENV) == "1":
        pytest.skip("; ".join(missing))
    pytest.fail("missing third-party server(s): " + "; ".join(missing), pytrace=False)


@contextlib.contextmanager
def running_thirdparty(
    server: ThirdPartyServer,
    transport: Transport,
    args: Sequence[str] = (),
    *,
    ready_timeout: float = READY_TIMEOUT,
) -> Iterator[str | list[str]]:
    """Start `server` over HTTP and yield its URL, or yield its argv for stdio.

    HTTP: its own process group on a free port (``PORT``), ready when the port accepts
    connections (bounded); stopped and reaped on exit.
    """
    if transport not in server.transports:
        raise ValueError(f"{server.name} does not support {transport}")
    argv = server.argv(transport, args)
    if transport == "stdio":
        yield argv
        return
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    with tempfile.TemporaryDirectory(prefix="mcp-3p-") as tmp:
        log = Path(tmp) / "output.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env=env,
                start_new_session=True,
                cwd=ROOT,
            )
        try:
            deadline = time.monotonic() + ready_timeout
            while not _port_open("127.0.0.1", port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{server.name} ({transport}) not listening on {port} "
                        f"(exit {proc.poll()})\nargv: {shlex.join(argv)}\n{_tail(log)}"
                    )
                time.sleep(0.05)  # polling interval, bounded by the deadline above
            path = "/mcp" if transport == "streamable-http" else "/sse"
            yield f"http://127.0.0.1:{port}{path}"
        finally:
            _stop(proc)
