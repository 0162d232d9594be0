"""Roots with third-party servers that ask on their own (issue #15).

`@modelcontextprotocol/server-filesystem` (stdio) and `@modelcontextprotocol/server-everything`
(Streamable HTTP, HTTP+SSE, stdio) send `roots/list` to the client right after
`notifications/initialized` and again after `notifications/roots/list_changed`, outside any
tool call.  Each cell runs the drivers' `roots` scenario (CONTRACT.md): the client declares
roots `file://<a>`, waits (bounded) for its handler, asks the server's roots tool, switches to
`file://<b>`, notifies, waits, asks again.

- DIRECT: client straight to the server, the control: what the gateway must preserve.
- GATEWAY: the same client through `gateway serve --route /mcp=<server>`; the same
  expectations.  A 2026-07-28 client has no server-initiated requests: each of its calls
  is first asked for its roots (an `input_required` round its SDK answers on its own) and
  runs on a pooled upstream session holding exactly those (docs/using/sessions.md), so its
  handler runs inside the tool call rather than before it, and a change of roots reaches
  the server with the next call.

Every cell is checked in three parts, so a partial fix shows which part it fixed:
`initial` (the handler answered `a`; handshake clients: before any call), `before` (the tool
names `a` and no other directory), `after` (the handler answered `b` after the change;
handshake clients: outside a call; the tool then names `b` and not `a`).
"""

from __future__ import annotations

import json
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from peers.registry import Peer, Transport, peer, require_installed, run_client
from peers.thirdparty import (
    SERVER_EVERYTHING,
    SERVER_FILESYSTEM,
    ThirdPartyServer,
)
from peers.thirdparty import require_installed as require_thirdparty

from tests.e2e.gateway_proc import gateway

pytestmark = pytest.mark.interop

MODERN = "2026-07-28"
# One pinned client per revision that has roots.
CLIENTS = {
    "2024-11-05": "python-1.7.1-client",
    "2025-03-26": "python-1.9.4-client",
    "2025-06-18": "python-1.22.0-client",
    "2025-11-25": "node-sdk1-client",
    MODERN: "python-2.3.0-client",
}
UPSTREAMS: dict[str, tuple[ThirdPartyServer, Transport]] = {
    "filesystem-stdio": (SERVER_FILESYSTEM, "stdio"),
    "everything-streamable-http": (SERVER_EVERYTHING, "streamable-http"),
    "everything-sse": (SERVER_EVERYTHING, "sse"),
    "everything-stdio": (SERVER_EVERYTHING, "stdio"),
}
PARTS = ("initial", "before", "after")
# Each bounded wait of the scenario (a direct server asks within ~0.7 s; only a missing
# ask costs the whole wait) and how many cells run at once (they mostly wait).
ROOTS_WAIT = 4.0
PARALLEL = 4
CLIENT_TIMEOUT = 60.0

Cell = tuple[str, str, str]  # (client revision, upstream id, "direct" | "gateway")


def uri(path: Path) -> str:
    return path.as_uri()


def names(text: str | None, path: Path) -> bool:
    """Does the tool's text name this directory (its path or file URI as one word)?"""
    words = (text or "").split()
    return str(path) in words or uri(path) in words


def scenario_args(server: ThirdPartyServer, a: Path, b: Path) -> list[str]:
    return [
        *("--root-a", uri(a), "--root-b", uri(b)),
        *("--roots-tool", server.roots_tool, "--roots-wait", str(ROOTS_WAIT)),
    ]


def client_args(client: Peer, server: ThirdPartyServer, a: Path, b: Path) -> list[str]:
    extra = scenario_args(server, a, b)
    if client.sdk.startswith("python-mcp"):
        extra += ["--step-timeout", "10"]
    return extra


def upstream_target(upstream: str, urls: dict[str, str], dirs: dict[str, Path]) -> list[str] | str:
    """The server-side end: an argv to spawn (stdio) or the shared HTTP server's URL."""
    server, transport = UPSTREAMS[upstream]
    if transport != "stdio":
        return urls[transport]
    start = [str(dirs["start"])] if server is SERVER_FILESYSTEM else []
    return server.argv("stdio", start)


def route_of(target: list[str] | str, transport: Transport) -> str:
    if isinstance(target, list):
        return f"/mcp=stdio:{shlex.join(target)},timeout=20"
    return f"/mcp={target},timeout=20" + (",transport=sse" if transport == "sse" else "")


def direct_skip(client_rev: str, client: Peer, transport: Transport) -> str | None:
    if client_rev == MODERN:
        return "a client pinned to 2026-07-28 cannot reach a 2025-era server without the gateway"
    if transport not in client.transports:
        return f"{client.name} has no {transport} transport"
    return None


def runnable(cell: Cell) -> bool:
    client_rev, upstream, via = cell
    client = peer(CLIENTS[client_rev])
    server, transport = UPSTREAMS[upstream]
    if client.missing or server.missing:
        return False
    return via == "gateway" or direct_skip(client_rev, client, transport) is None


class Cells:
    """Runs each (client, upstream, via) scenario once; the three part-tests share it.

    Cells are independent (a fresh gateway each, a fresh stdio server each, an own session
    on the shared HTTP servers) and mostly wait, so `prefetch` runs them in parallel."""

    def __init__(self, urls: dict[str, str], dirs: dict[str, Path], tmp: Path) -> None:
        self.urls, self.dirs, self.tmp = urls, dirs, tmp
        self.done: dict[Cell, dict[str, Any] | BaseException] = {}
        self.wanted: list[Cell] = []

    def prefetch(self, cells: list[Cell], workers: int = PARALLEL) -> None:
        todo = [c for c in dict.fromkeys(cells) if c not in self.done and runnable(c)]

        def run(cell: Cell) -> dict[str, Any] | BaseException:
            try:
                return self._run(*cell)
            except Exception as exc:  # reported by the tests of that cell
                return exc

        with ThreadPoolExecutor(workers) as pool:
            self.done.update(zip(todo, pool.map(run, todo), strict=True))

    def get(self, cell: Cell) -> dict[str, Any]:
        if cell not in self.done:
            # this client's selected cells on the same side, together: a batch stays
            # well within the per-test timeout
            self.prefetch([cell, *(c for c in self.wanted if c[0::2] == cell[0::2])])
        found = self.done[cell]
        if isinstance(found, BaseException):
            raise found
        return found

    def _run(self, client_rev: str, upstream: str, via: str) -> dict[str, Any]:
        client = peer(CLIENTS[client_rev])
        server, transport = UPSTREAMS[upstream]
        target = upstream_target(upstream, self.urls, self.dirs)
        extra = client_args(client, server, self.dirs["a"], self.dirs["b"])
        if via == "direct":
            out = run_client(client, target, transport, "roots", CLIENT_TIMEOUT, extra)
            out["_log"] = ""
            return out
        with gateway(route_of(target, transport), tmp_path=self.tmp) as gw:
            out = run_client(
                client, gw.url("/mcp"), client.http_transport(), "roots", CLIENT_TIMEOUT, extra
            )
            out["_log"] = gw.log()
        return out


@pytest.fixture(scope="module")
def cells(
    request: pytest.FixtureRequest,
    everything_urls: dict[str, str],
    root_dirs: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Cells:
    """The cells, and which ones the selected tests need (run in batches, see `get`)."""
    found = Cells(everything_urls, root_dirs, tmp_path_factory.mktemp("gw"))
    for item in request.session.items:
        spec = getattr(item, "callspec", None)
        name = getattr(item, "originalname", "")
        if spec is not None and name in ("test_direct", "test_gateway"):
            found.wanted.append((spec.params["client_rev"], spec.params["upstream"], name[5:]))
    return found


def step(out: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(out["steps"].get(name, {}).get("result") or {})


def answered(out: dict[str, Any], path: Path) -> bool:
    """Did the client's roots handler ever answer with this directory?"""
    return any(uri(path) in i["roots"] for i in (out.get("roots") or {}).get("invocations", []))


def problems(
    out: dict[str, Any], part: str, client_rev: str, own: tuple[Path, Path], foreign: list[Path]
) -> list[str]:
    """What is wrong with one part of a cell (empty: as a direct connection behaves)."""
    a, b = own
    handshake = client_rev != MODERN
    found: list[str] = []
    if part == "initial":
        if handshake and not step(out, "wait_roots_initial").get("invoked"):
            found.append(f"roots handler not invoked within {ROOTS_WAIT}s of connecting")
        if not answered(out, a):
            found.append("roots handler never answered with root a")
    elif part == "before":
        text = step(out, "tool_before").get("text")
        if not names(text, a) or any(names(text, p) for p in [b, *foreign]):
            found.append(f"tool before the change should name root a only, said {text!r}")
    else:
        if handshake and not step(out, "wait_roots_changed").get("invoked"):
            found.append(f"roots handler not invoked within {ROOTS_WAIT}s of list_changed")
        if not answered(out, b):
            found.append("roots handler never answered with root b")
        text = step(out, "tool_after").get("text")
        if not names(text, b) or any(names(text, p) for p in [a, *foreign]):
            found.append(f"tool after the change should name root b only, said {text!r}")
    return found


def report(out: dict[str, Any]) -> str:
    shown = {k: v for k, v in out.items() if not k.startswith("_")}
    shown["steps"] = {k: v for k, v in out["steps"].items() if k != "connect"}
    log = [line for line in out.get("_log", "").splitlines() if "roots" in line.lower()]
    return (
        json.dumps(shown, indent=1)[-3000:]
        + "\nclient stderr:\n"
        + out.get("_stderr", "")[-1500:]
        + "\ngateway log lines about roots:\n"
        + "\n".join(log[-10:])
    )


def cases(via: str) -> list[Any]:
    """Every (client, server, part) cell; direct cells only where the client can reach
    the server at all (a pinned 2026-07-28 client cannot talk to a 2025-era server
    without the gateway, and 1.7.1 has no Streamable HTTP): those are not cells, so
    nothing is skipped."""
    out = []
    for client_rev in CLIENTS:
        for upstream in UPSTREAMS:
            _, transport = UPSTREAMS[upstream]
            if via == "direct" and direct_skip(client_rev, peer(CLIENTS[client_rev]), transport):
                continue
            for part in PARTS:
                out.append(
                    pytest.param(client_rev, upstream, part, id=f"{client_rev}-{upstream}-{part}")
                )
    return out


def _check(cells: Cells, client_rev: str, upstream: str, part: str, via: str) -> None:
    client = peer(CLIENTS[client_rev])
    server, _ = UPSTREAMS[upstream]
    require_installed(client)
    require_thirdparty(server)
    out = cells.get((client_rev, upstream, via))
    own = (cells.dirs["a"], cells.dirs["b"])
    foreign = [cells.dirs["start"]]
    found = problems(out, part, client_rev, own, foreign)
    assert not found, "\n".join(found) + "\n" + report(out)


@pytest.mark.parametrize(("client_rev", "upstream", "part"), cases("direct"))
def test_direct(cells: Cells, client_rev: str, upstream: str, part: str) -> None:
    """Control: the client straight to the third-party server."""
    _check(cells, client_rev, upstream, part, "direct")


@pytest.mark.parametrize(("client_rev", "upstream", "part"), cases("gateway"))
def test_gateway(cells: Cells, client_rev: str, upstream: str, part: str) -> None:
    """The same client through `gateway serve`: the same expectations."""
    _check(cells, client_rev, upstream, part, "gateway")


# --- two clients at once through one gateway --------------------------------------------

# Who runs at once: (label, client revision, extra driver arguments).
Runner = tuple[str, str, tuple[str, ...]]
PAIR: list[Runner] = [  # python-mcp 1.22.0 and typescript-sdk 1.32.2
    ("2025-06-18", "2025-06-18", ()),
    ("2025-11-25", "2025-11-25", ()),
]
# Two 2026-07-28 clients of the same principal (no credentials: both `anonymous`), so
# the same pool but for their roots: python-mcp 2.3.0 pinned, and in its auto mode
# (it probes `server/discover`, which the gateway answers at 2026-07-28).
MODERN_PAIR: list[Runner] = [
    ("2026-07-28 pinned", MODERN, ()),
    ("2026-07-28 auto", MODERN, ("--mode", "auto")),
]


def _two_clients(
    cells: Cells, upstream: str, tmp_path: Path, runners: list[Runner]
) -> dict[str, dict[str, Any]]:
    """Both runners' roots scenarios at once through one gateway (their calls
    interleave), each with roots of its own; every problem of theirs is reported."""
    server, transport = UPSTREAMS[upstream]
    require_installed(*(peer(CLIENTS[rev]) for _, rev, _ in runners))
    require_thirdparty(server)
    dirs = cells.dirs
    labels = [label for label, _, _ in runners]
    own = {labels[0]: (dirs["a"], dirs["b"]), labels[1]: (dirs["a2"], dirs["b2"])}
    target = upstream_target(upstream, cells.urls, dirs)
    with gateway(route_of(target, transport), tmp_path=tmp_path) as gw:

        def run(runner: Runner) -> dict[str, Any]:
            label, rev, more = runner
            client = peer(CLIENTS[rev])
            extra = [*client_args(client, server, *own[label]), *more]
            url = gw.url("/mcp")
            return run_client(client, url, client.http_transport(), "roots", CLIENT_TIMEOUT, extra)

        with ThreadPoolExecutor(2) as pool:
            outs = dict(zip(labels, pool.map(run, runners), strict=True))
        log = gw.log()
    found = []
    for (label, rev, _), out in zip(runners, outs.values(), strict=True):
        out["_log"] = log
        other = [p for r, pair in own.items() if r != label for p in pair]
        for part in PARTS:
            for problem in problems(out, part, rev, own[label], [dirs["start"], *other]):
                found.append(f"{label} client, {part}: {problem}")
    assert not found, "\n".join(found) + "\n" + "\n".join(report(o) for o in outs.values())
    return outs


@pytest.mark.parametrize("upstream", ["filesystem-stdio", "everything-streamable-http"])
def test_two_clients_keep_their_own_roots(cells: Cells, upstream: str, tmp_path: Path) -> None:
    """Two clients at once through one gateway with different roots: every answer the
    server gives a client names only that client's roots."""
    _two_clients(cells, upstream, tmp_path, PAIR)


@pytest.mark.parametrize("upstream", ["filesystem-stdio", "everything-streamable-http"])
def test_two_stateless_clients_keep_their_own_roots(
    cells: Cells, upstream: str, tmp_path: Path
) -> None:
    """Two 2026-07-28 clients of one principal, different roots, calls interleaved:
    each call's server sees its own client's roots (its handler answered them, in the
    call's round), never the other's, before and after each changes its roots."""
    outs = _two_clients(cells, upstream, tmp_path, MODERN_PAIR)
    for label, out in outs.items():
        calls = len((out.get("roots") or {}).get("invocations", []))
        assert calls >= 2, f"{label}: its roots handler answered {calls} time(s)"
