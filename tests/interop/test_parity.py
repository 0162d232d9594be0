"""Direct versus gateway: for a same-revision pair, the gateway is invisible.

The same official-SDK client runs the same scenario against the same server,
once directly and once through `gateway serve`; every step's result or error
must be the same.  Documented differences are normalized away first: none
are expected beyond what `_normalize` names (the unknown-method step only).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from peers.registry import peer, require_installed, route_options, run_client, running_server

from tests.e2e.gateway_proc import gateway
from tests.interop.test_matrix import CLIENTS, REVISIONS, SERVERS

pytestmark = pytest.mark.interop


def _normalize(out: dict[str, Any]) -> dict[str, Any]:
    steps = json.loads(json.dumps(out["steps"]))
    # Documented difference: a server that never answers a method it does not know
    # leaves a direct client to time out; through the gateway the client gets a
    # prompt error instead.  Only "it failed" is compared for that step.
    unknown = steps.get("unknown_method", {})
    if "error" in unknown:
        unknown["error"] = {"failed": True}
    return {"protocolVersion": out.get("protocolVersion"), "steps": steps}


def _diff(direct: Any, through: Any, path: str = "") -> list[str]:
    if isinstance(direct, dict) and isinstance(through, dict):
        out = []
        for key in sorted(set(direct) | set(through)):
            if key not in direct:
                out.append(f"{path}.{key}: only through the gateway: {through[key]!r}"[:300])
            elif key not in through:
                out.append(f"{path}.{key}: only direct: {direct[key]!r}"[:300])
            else:
                out.extend(_diff(direct[key], through[key], f"{path}.{key}"))
        return out
    if direct != through:
        return [f"{path}: direct {direct!r} != gateway {through!r}"[:300]]
    return []


@pytest.mark.parametrize("revision", REVISIONS)
def test_same_revision_pair_sees_the_same(revision: str, tmp_path: Any) -> None:
    client, server = peer(CLIENTS[revision]), peer(SERVERS[revision])
    require_installed(client, server)
    transport = server.http_transport()
    # A fresh server for each run: both start from the same state.
    with running_server(server, transport) as url:
        assert isinstance(url, str)
        direct = run_client(client, url, client.http_transport(), "interactive")
    with running_server(server, transport) as url:
        assert isinstance(url, str)
        route = f"/mcp={url},timeout=20{route_options(server)}"
        with gateway(route, tmp_path=tmp_path) as gw:
            through = run_client(client, gw.url("/mcp"), client.http_transport(), "interactive")
    differences = _diff(_normalize(direct), _normalize(through))
    assert not differences, "\n".join(differences)
