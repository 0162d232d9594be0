"""`python -m bench.path`: how many files of `gateway/` one translated round walks through.

Why: a request that hops through many files and folders is hard to follow and to
change (issue 26).  This makes that a number anyone can count again, before and
after a restructuring, instead of an impression from reading the code.

    python -m bench.path                  # 5 warm-up rounds, then one measured
    python -m bench.path --json           # the same, machine-readable (with the call order)
    python -m bench.path --loop asyncio   # default: the gateway's own (auto: uvloop if installed)

It starts the demo server (2025-11-25, handshake era; `bench.upstreams legacy`)
and a gateway in front of it, each a real process (`bench.procs.Lab`), the
gateway under `bench.pathtrace`.  A 2026-07-28 client (stateless, per-request
``_meta`` with elicitation among its capabilities) does ``greet_me`` rounds:
the call is answered ``input_required`` (the upstream's elicitation), the retry
carries ``inputResponses`` and ``requestState`` and gets the greeting.  After
the warm-up, SIGUSR1 switches the tracer on inside the gateway, one round runs,
a short settle, SIGUSR2 switches it off and writes every call of a `gateway/`
function, in order.

Figures, over fresh calls (a coroutine's resumptions are counted apart):
``files`` distinct files entered; ``changes`` consecutive calls in different
files; ``cross-folder`` those of them whose files are in different folders.
By caller (`bench.spine`, issue 38): layer hand-offs, doors, calls back up,
each with its list.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import json
import os
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import FrameType
from typing import Any

import aiohttp

from bench import spine
from bench.procs import Lab, Mid
from bench.wire import ModernClient


@dataclass(frozen=True)
class Call:
    file: str  # under gateway/, e.g. "bridge/forwarder.py"
    name: str  # qualified name
    line: int  # first line of the function
    fresh: bool  # False: a coroutine or generator resumed, not called
    caller: tuple[str, str, int] | None = None  # the nearest gateway/ frame that called it


def hops(calls: list[Call]) -> dict[str, int]:
    """Distinct files, changes of file between consecutive calls, and the cross-folder ones."""
    pairs = list(itertools.pairwise(calls))
    return {
        "files": len({call.file for call in calls}),
        "changes": sum(a.file != b.file for a, b in pairs),
        "cross_folder": sum(
            PurePosixPath(a.file).parent != PurePosixPath(b.file).parent for a, b in pairs
        ),
    }


def analyse(calls: list[Call]) -> dict[str, Any]:
    fresh = [call for call in calls if call.fresh]
    called = Counter(call.file for call in fresh)
    resumed = Counter(call.file for call in calls if not call.fresh)
    per_file = [
        {"file": file, "calls": called[file], "resumptions": resumed[file]}
        for file in sorted(called.keys() | resumed.keys(), key=lambda f: (-called[f], f))
    ]
    return {
        "calls": len(fresh),
        "resumptions": len(calls) - len(fresh),
        **hops(fresh),
        "with_resumptions": hops(calls),
        "per_file": per_file,
        "order": [f"{call.file}:{call.line}:{call.name}" for call in fresh],
        "spine": spine.spine(calls),
    }


def _switch(pid: int, signum: signal.Signals, marker: Path, timeout: float = 10.0) -> None:
    """Signal the gateway (a process Lab started) and wait for the file that says it did it."""
    marker.unlink(missing_ok=True)
    os.kill(pid, signum)
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the gateway did not answer {signum.name} ({marker})")
        time.sleep(0.01)


async def measure(gateway: Mid, trace: Path, warmup: int, settle: float) -> None:
    """``warmup`` rounds, then one round traced; the gateway writes ``trace``."""
    async with aiohttp.ClientSession() as http:
        client = ModernClient(http, gateway.url)
        for n in range(warmup):
            await client.greet_round(2 * n + 1)
        pid = gateway.proc.pid
        on = trace.with_name(trace.name + ".on")
        await asyncio.to_thread(_switch, pid, signal.SIGUSR1, on)
        await client.greet_round(1_000_001)
        await asyncio.sleep(settle)  # what the gateway does after answering counts too
        await asyncio.to_thread(_switch, pid, signal.SIGUSR2, trace)


def read_trace(trace: Path) -> list[Call]:
    records = json.loads(trace.read_text())["events"]
    return [
        Call(file, name, line, fresh, None if caller is None else tuple(caller))
        for file, name, line, fresh, caller in records
    ]


def run(loop: str, warmup: int, settle: float, pass_through: bool = True) -> dict[str, Any]:
    """The round's figures; ``pass_through=False``: with the gateway's pass-through lane
    off, the full path's round alone (the lane first tries each call of this pair)."""
    lab = Lab()
    try:
        upstream = lab.upstream("legacy")
        trace = lab.workdir / "path-trace.json"
        extra = [] if pass_through else ["--no-pass-through"]
        gateway = lab.gateway(
            "gateway", upstream.url, uvloop=loop == "uvloop", trace_path=trace, extra=extra
        )
        asyncio.run(measure(gateway, trace, warmup, settle))
        gateway.proc.check_alive()
        calls = read_trace(trace)
    finally:
        lab.close()
    return {
        "round": "2026-07-28 client -> gateway -> 2025-11-25 demo server: greet_me, "
        "input_required, retry with inputResponses + requestState",
        "python": sys.version.split()[0],
        "loop": loop,
        "warmup_rounds": warmup,
        "settle_s": settle,
        **analyse(calls),
    }


def render(report: dict[str, Any], top: int) -> str:
    extra = report["with_resumptions"]
    lines = [
        f"{report['round']}",
        f"Python {report['python']}, gateway --loop {report['loop']}, "
        f"{report['warmup_rounds']} warm-up rounds, one measured",
        f"calls of gateway/ functions   {report['calls']:5d}  "
        f"(+ {report['resumptions']} coroutine/generator resumptions)",
        f"files entered                 {report['files']:5d}",
        f"changes of file               {report['changes']:5d}",
        f"  of which across folders     {report['cross_folder']:5d}",
        f"counting resumptions as calls: {extra['files']} files, {extra['changes']} changes, "
        f"{extra['cross_folder']} across folders",
        "",
        "by caller (bench/spine.py says what each figure counts):",
        *spine.render(report["spine"]),
        "",
        f"{'calls':>6} {'resumed':>7}  file (under gateway/)",
    ]
    lines += [
        f"{row['calls']:6d} {row['resumptions']:7d}  {row['file']}"
        for row in report["per_file"][:top]
    ]
    if len(report["per_file"]) > top:
        lines.append(f"... {len(report['per_file']) - top} more (--top, --json)")
    return "\n".join(lines)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through run()'s cleanup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.path", description=__doc__.split("\n")[0]
    )
    default_loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default=default_loop)
    parser.add_argument("--warmup", type=int, default=5, help="rounds before the measured one")
    parser.add_argument("--settle", type=float, default=0.2, help="s traced after the answer")
    parser.add_argument("--top", type=int, default=100, help="files listed (default all)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    report = run(args.loop, args.warmup, args.settle)
    print(json.dumps(report, indent=2) if args.json else render(report, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
