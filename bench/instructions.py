"""Instructions per call under callgrind: the gateway against the reference proxy.

    python -m bench.instructions                 # 300 calls per cell, 1 and 16 callers
    python -m bench.instructions --calls 500 --loop uvloop --json
    python -m bench.instructions --full-path     # also same-revision gateways, --no-pass-through

CPU seconds per call move by +-20% on a shared machine from minute to minute;
instructions do not: callgrind counts what the process executes in user space,
the same for the same code and input whatever else runs (system calls and the
kernel's work are not counted).  Each reference proxy and gateway runs under
``valgrind --tool=callgrind`` (about 50 times slower), the upstreams run
natively.  Per cell: warm-up calls, the counters zeroed (``callgrind_control
-z``), the measured calls, a dump (``-d``); its total over the calls is the
figure.  The dumps stay in the work directory for ``callgrind_annotate``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.load import run_load
from bench.procs import Lab, Proc
from bench.wire import Client, LegacyClient, ModernClient

START_TIMEOUT = 300.0  # a Python process under callgrind starts in tens of seconds
WARM_UP = 100


@dataclass
class Path_:
    label: str
    upstream: str  # legacy | modern
    mid: str  # ref | gateway | full (a gateway with its pass-through lane off)
    client: type[Client]


PATHS = [
    Path_("2025-11-25 client -> ref proxy -> legacy", "legacy", "ref", LegacyClient),
    Path_("2025-11-25 client -> gateway -> legacy", "legacy", "gateway", LegacyClient),
    Path_("2026-07-28 client -> gateway -> legacy", "legacy", "gateway", ModernClient),
    Path_("2026-07-28 client -> ref proxy -> modern", "modern", "ref", ModernClient),
    Path_("2026-07-28 client -> gateway -> modern", "modern", "gateway", ModernClient),
    Path_("2025-11-25 client -> gateway -> modern", "modern", "gateway", LegacyClient),
]
FULL_PATHS = [
    Path_("2025-11-25 client -> gw, no pass-through -> legacy", "legacy", "full", LegacyClient),
    Path_("2026-07-28 client -> gw, no pass-through -> modern", "modern", "full", ModernClient),
]


def _valgrind(workdir: Path, name: str) -> list[str]:
    out = workdir / f"{name}.%p.cg"
    return [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        "--dump-instr=no",
        "--dump-line=no",
    ]


def start_mid(
    lab: Lab, kind: str, name: str, target: str, loop: str, ref_loop: str
) -> tuple[Proc, str]:
    """A reference proxy or a gateway, under callgrind, in front of ``target``."""
    wrapper = _valgrind(lab.workdir, name)
    if kind == "ref":
        extra = ["--uvloop"] if ref_loop == "uvloop" else []
        mid = lab.refproxy(name, target, timeout=START_TIMEOUT, wrapper=wrapper, extra=extra)
    else:
        uvloop, extra = loop == "uvloop", ["--no-pass-through"] if kind == "full" else []
        mid = lab.gateway(
            name, target, uvloop=uvloop, timeout=START_TIMEOUT, wrapper=wrapper, extra=extra
        )
    return mid.proc, mid.url


def _control(option: str, proc: Proc) -> None:
    subprocess.run(
        ["callgrind_control", option, str(proc.pid)],
        check=True,
        capture_output=True,
        timeout=120,
    )


def _dumped(workdir: Path, name: str, proc: Proc, before: set[Path]) -> int:
    """The instruction total of the dump ``callgrind_control -d`` just wrote."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        new = set(workdir.glob(f"{name}.{proc.pid}.cg.*")) - before
        for dump in new:
            text = dump.read_text(errors="replace")
            for line in text.splitlines():
                if line.startswith(("totals:", "summary:")):
                    return int(line.split()[1])
        time.sleep(0.2)
    raise TimeoutError(f"no callgrind dump from {name}")


async def _cell(lab: Lab, name: str, proc: Proc, clients: list[Client], calls: int) -> float:
    """Instructions per call of ``proc`` over ``calls`` echo calls by ``clients``."""

    async def call(i: int) -> None:
        await clients[i % len(clients)].echo(i)

    await run_load(call, total=WARM_UP, concurrency=len(clients), time_cap_s=600,
                   call_timeout_s=120)  # fmt: skip
    await asyncio.to_thread(_control, "-z", proc)
    result = await run_load(
        call, total=calls, concurrency=len(clients), time_cap_s=1200, call_timeout_s=120
    )
    before = set(lab.workdir.glob(f"{name}.{proc.pid}.cg.*"))
    await asyncio.to_thread(_control, "-d", proc)
    if result.errors:
        raise RuntimeError(f"{name}: {result.errors} errors, first: {result.first_error}")
    total = await asyncio.to_thread(_dumped, lab.workdir, name, proc, before)
    return total / calls


async def measure(
    calls: int, callers: list[int], loop: str, ref_loop: str, full_path: bool = False
) -> list[dict[str, Any]]:
    lab = Lab()
    rows: list[dict[str, Any]] = []
    paths = PATHS + FULL_PATHS if full_path else PATHS
    try:
        upstreams = {kind: lab.upstream(kind) for kind in ("legacy", "modern")}
        mids = {
            (mid, kind): start_mid(lab, mid, f"{mid}-{kind}", upstreams[kind].url, loop, ref_loop)
            for mid in ("ref", "gateway", *(("full",) if full_path else ()))
            for kind in upstreams
        }
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            for path in paths:
                proc, url = mids[(path.mid, path.upstream)]
                for n in callers:
                    clients = [path.client(http, url) for _ in range(n)]
                    for client in clients:
                        if isinstance(client, LegacyClient):
                            await client.initialize()
                    name = f"{path.mid}-{path.upstream}"
                    per_call = await _cell(lab, name, proc, clients, calls)
                    rows.append({"label": path.label, "callers": n, "instructions": per_call})
                    print(f"  {path.label:<42} {n:>3} callers {per_call / 1e6:7.3f} M",
                          file=sys.stderr)  # fmt: skip
        print(f"callgrind dumps: {lab.workdir}", file=sys.stderr)
    finally:
        lab.close()
    _ratios(rows)
    return rows


def _ratios(rows: list[dict[str, Any]]) -> None:
    """Each row's instructions over its reference proxy's (same upstream, callers)."""
    ref = {
        (row["label"].rsplit("-> ", 1)[1], row["callers"]): row["instructions"]
        for row in rows
        if "ref proxy" in row["label"]
    }
    for row in rows:
        base = ref.get((row["label"].rsplit("-> ", 1)[1], row["callers"]))
        row["x_ref"] = row["instructions"] / base if base else None


def render(rows: list[dict[str, Any]], calls: int, loop: str) -> str:
    lines = [
        f"instructions per call (callgrind, user space), {calls} calls per cell, --loop {loop}",
        f"{'path':<42} {'callers':>7} {'M instr':>8} {'xref':>5}",
    ]
    for row in rows:
        x_ref = f"{row['x_ref']:.2f}" if row["x_ref"] is not None else "-"
        lines.append(
            f"{row['label']:<42} {row['callers']:>7} {row['instructions'] / 1e6:8.3f} {x_ref:>5}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("--calls", type=int, default=300, help="measured calls per cell")
    parser.add_argument("--callers", default="1,16", help="comma-separated caller counts")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    # The reference proxy runs on the gateway's loop: a uvloop gateway against an
    # asyncio proxy measures the loops (uvloop takes ~19 % of a proxy's instructions
    # away), not the gateway (docs/performance.md, "The two measures").
    parser.add_argument(
        "--ref-loop", choices=("same", "asyncio", "uvloop"), default="same",
        help="the reference proxy's loop (default: the gateway's)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--full-path", action="store_true", help="also gateways with --no-pass-through"
    )
    args = parser.parse_args()
    for program in ("valgrind", "callgrind_control"):
        if shutil.which(program) is None:
            parser.error(f"{program} is not installed (Debian: apt-get install valgrind)")
    callers = [int(n) for n in args.callers.split(",")]
    ref_loop = args.loop if args.ref_loop == "same" else args.ref_loop
    rows = asyncio.run(measure(args.calls, callers, args.loop, ref_loop, args.full_path))
    print(json.dumps(rows, indent=2) if args.json else render(rows, args.calls, args.loop))


if __name__ == "__main__":
    main()
