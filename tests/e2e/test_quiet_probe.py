"""A legacy SDK stdio server's complaint about the era probe is not a failure (issue 39,
item 5): the Python SDK 1.x server logs a long "Failed to validate request" for the
2026-07-28 request the probe sends first; those lines go to debug, and a good start
reads as one (`route ready`, no stderr line at info)."""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path

from peers.registry import peer, require_installed

from tests.e2e.gateway_proc import gateway

SERVER = "python-1.22.0-server"


def test_a_legacy_servers_probe_complaints_stay_at_debug(tmp_path: Path) -> None:
    server = peer(SERVER)
    require_installed(server)
    route = f"/mcp=stdio:{shlex.join(server.server_argv('stdio'))}"
    with gateway(route, tmp_path=tmp_path) as gw:
        deadline = time.monotonic() + 30
        while '"route ready"' not in gw.log():
            assert time.monotonic() < deadline, gw.log()[-3000:]
            time.sleep(0.1)  # polling the log, bounded by the deadline
        log = gw.log()
    records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    stderr_at_info = [
        r for r in records if r.get("event") == "stdio server stderr" and r.get("level") == "info"
    ]
    assert not [r for r in stderr_at_info if re.search("validat", r.get("line", ""), re.I)]
    assert any(r.get("event") == "route ready" for r in records)
