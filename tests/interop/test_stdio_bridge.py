"""stdio on both sides of the gateway, with official SDK peers of the other era.

- `gateway serve --route /x=stdio:...` spawns an SDK stdio server and HTTP
  clients of the other era use it;
- an SDK stdio client spawns `gateway stdio --upstream URL` in front of an HTTP
  server of the other era.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from peers.registry import peer, require_installed, run_client, running_server

from tests.e2e.gateway_proc import gateway
from tests.interop.test_matrix import check_cell, check_interactive

pytestmark = pytest.mark.interop

SERVER_REVISION = {"python-2.3.0-server": "2026-07-28", "python-1.22.0-server": "2025-06-18"}


def _assert_all_ok(*verdicts: dict[str, str], out: dict[str, object]) -> None:
    failed = {k: v for d in verdicts for k, v in d.items() if v != "ok"}
    assert not failed, json.dumps(failed, indent=1) + "\n" + str(out.get("_stderr", ""))[-3000:]


@pytest.mark.parametrize(
    ("client_rev", "client_name", "server_name"),
    [
        ("2026-07-28", "python-2.3.0-client", "python-1.30.0-server"),
        ("2025-11-25", "node-sdk1-client", "python-2.3.0-server"),
    ],
    ids=["modern-client->legacy-stdio-server", "legacy-client->modern-stdio-server"],
)
def test_http_clients_use_a_spawned_stdio_server(
    tmp_path: pytest.TempPathFactory, client_rev: str, client_name: str, server_name: str
) -> None:
    client, server = peer(client_name), peer(server_name)
    require_installed(client, server)
    command = shlex.join(server.server_argv("stdio"))
    with gateway(f"/stdio=stdio:{command},timeout=30", tmp_path=tmp_path) as gw:  # type: ignore[arg-type]
        out = run_client(client, gw.url("/stdio"), "streamable-http", "interactive")
        log = gw.log()
    _assert_all_ok(
        check_cell(out, client_rev, server), check_interactive(out, client_rev, server), out=out
    )
    assert '"stdio server stderr"' in log or "era detected" in log


@pytest.mark.parametrize(
    ("client_rev", "client_name", "server_name"),
    [
        ("2025-11-25", "python-1.30.0-client", "python-2.3.0-server"),
        ("2026-07-28", "python-2.3.0-client", "python-1.22.0-server"),
    ],
    ids=["legacy-stdio-client->modern-http-server", "modern-stdio-client->legacy-http-server"],
)
def test_stdio_clients_drive_gateway_stdio(
    tmp_path: Path, client_rev: str, client_name: str, server_name: str
) -> None:
    client, server = peer(client_name), peer(server_name)
    require_installed(client, server)
    log = tmp_path / "gateway-stdio.log"
    with running_server(server, "streamable-http") as url:
        assert isinstance(url, str)
        gateway_argv = [sys.executable, "-m", "gateway", "stdio", "--upstream", url]
        gateway_argv += ["--timeout", "30", "--log-level", "info"]
        # Its log (stderr) kept in a file: the SDK clients do not pass it on.
        argv = ["/bin/sh", "-c", f"exec {shlex.join(gateway_argv)} 2>>{shlex.quote(str(log))}"]
        out = run_client(client, argv, "stdio", "interactive")
    _assert_all_ok(
        check_cell(out, client_rev, server), check_interactive(out, client_rev, server), out=out
    )
    # The client spoke its own revision to `gateway stdio`, which met the server's.
    assert out.get("protocolVersion") == client_rev, out.get("protocolVersion")
    text = log.read_text(errors="replace")
    detected = [
        json.loads(line)
        for line in text.splitlines()
        if line.startswith("{") and '"event": "upstream era detected"' in line
    ]
    assert [d["revision"] for d in detected] == [SERVER_REVISION[server_name]], text[-3000:]
