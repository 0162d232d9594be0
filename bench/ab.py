"""A/B: this checkout's gateway against another checkout's, interleaved.

    git worktree add /tmp/base <commit>
    python -m bench.ab /tmp/base                 # 4 shuffled rounds, 1,500 calls at 16 callers
    python -m bench.ab /tmp/base --rounds 6 --calls 3000 --loop uvloop
    python -m bench.ab . --base-python /tmp/venv313/bin/python   # interpreters compared
    python -m bench.ab . --this-options ',tools=allow:echo,rate=100000/s'   # a route policy's cost
    python -m bench.ab . --args '--cluster redis://127.0.0.1:6379/0' --this-options ',rate=100000/s'

On a shared machine one cell's CPU per call moves by +-20% from minute to
minute, more than most single changes save. Here both gateways run at once, in
front of the same two upstreams, and every round runs every (gateway, path)
cell in a new random order, so the load others put on the machine falls on
both alike; the medians over the rounds are compared. Each gateway is started
with its own checkout as working directory (``python -m gateway`` imports
from there) and this environment's packages.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shlex
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import aiohttp

from bench.load import run_load
from bench.procs import HOST, Lab, Proc, _wait_http, cpu_seconds, free_port
from bench.wire import Client, LegacyClient, ModernClient

REPO = Path(__file__).resolve().parents[1]
CALLERS = 16
# (name, upstream, client class)
PATHS: list[tuple[str, str, type[Client]]] = [
    ("2025-11-25 client -> legacy", "legacy", LegacyClient),
    ("2026-07-28 client -> legacy", "legacy", ModernClient),
    ("2026-07-28 client -> modern", "modern", ModernClient),
    ("2025-11-25 client -> modern", "modern", LegacyClient),
]


def start_gateway(
    lab: Lab,
    checkout: Path,
    name: str,
    target: str,
    loop: str,
    python: str,
    options: str = "",
    args: Sequence[str] = (),
) -> tuple[Proc, str]:
    """``options``: appended to the route (``,key=value...``); ``args``: more for `serve`."""
    port = free_port()
    argv = [python, "-m", "gateway", "serve", "--listen", f"{HOST}:{port}"]
    argv += ["--route", f"/mcp={target}{options}", "--log-level", "warning", "--drain-timeout", "1"]
    argv += ["--loop", loop, *args]
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    log_path = lab.workdir / f"{name}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            argv, cwd=checkout, stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )  # fmt: skip
    proc = Proc(name, process, log_path)
    lab.procs.append(proc)
    _wait_http(f"http://{HOST}:{port}/readyz", 30.0, proc)
    return proc, f"http://{HOST}:{port}/mcp"


async def _clients(http: aiohttp.ClientSession, cls: type[Client], url: str) -> list[Client]:
    clients = [cls(http, url) for _ in range(CALLERS)]
    for client in clients:
        if isinstance(client, LegacyClient):
            await client.initialize()
    return clients


async def _cell(proc: Proc, clients: list[Client], calls: int) -> tuple[float, float]:
    """CPU us per call of ``proc`` and req/s, for ``calls`` echo calls."""

    async def call(i: int) -> None:
        await clients[i % CALLERS].echo(i)

    before = cpu_seconds(proc.pid)
    result = await run_load(
        call, total=calls, concurrency=CALLERS, time_cap_s=300, call_timeout_s=30
    )
    if result.errors:
        raise RuntimeError(f"{proc.name}: {result.errors} errors, first: {result.first_error}")
    return (cpu_seconds(proc.pid) - before) / calls * 1e6, result.throughput


async def compare(
    base: Path,
    rounds: int,
    calls: int,
    loop: str,
    pythons: tuple[str, str],
    options: str = "",
    args: Sequence[str] = (),
) -> None:
    lab = Lab()
    try:
        upstreams = {kind: lab.upstream(kind) for kind in ("legacy", "modern")}
        sides = (("base", base, pythons[0], ""), ("this", REPO, pythons[1], options))
        gateways = {
            (side, kind): start_gateway(
                lab, checkout, f"{side}-{kind}", upstream.url, loop, python, extra, args
            )
            for side, checkout, python, extra in sides
            for kind, upstream in upstreams.items()
        }
        figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            cells = {}
            for (side, kind), (proc, url) in gateways.items():
                for name, upstream, cls in PATHS:
                    if upstream == kind:
                        cells[(side, name)] = (proc, await _clients(http, cls, url))
            for proc, clients in cells.values():
                await _cell(proc, clients, 200)  # warm-up
            for _ in range(rounds):
                order = list(cells)
                random.shuffle(order)
                for key in order:
                    figures.setdefault(key, []).append(await _cell(*cells[key], calls))
        _report(figures, rounds, calls, loop)
    finally:
        lab.close()


def _report(
    figures: dict[tuple[str, str], list[tuple[float, float]]], rounds: int, calls: int, loop: str
) -> None:
    print(f"{rounds} shuffled rounds of {calls} calls at {CALLERS} callers, --loop {loop}; medians")
    columns = ("base us", "this us", "change", "base r/s", "this r/s")
    print(f"{'path':30} " + " ".join(f"{c:>8}" for c in columns))
    for name, _, _ in PATHS:
        base_cpu = statistics.median(f[0] for f in figures[("base", name)])
        this_cpu = statistics.median(f[0] for f in figures[("this", name)])
        base_rps = statistics.median(f[1] for f in figures[("base", name)])
        this_rps = statistics.median(f[1] for f in figures[("this", name)])
        change = (this_cpu - base_cpu) / base_cpu * 100
        print(
            f"{name:30} {base_cpu:8.0f} {this_cpu:8.0f} {change:+7.0f}% "
            f"{base_rps:8.0f} {this_rps:8.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n")[0])
    parser.add_argument("base", type=Path, help="the other checkout (e.g. a git worktree)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--calls", type=int, default=1500, help="calls per cell and round")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument(
        "--base-python",
        default=sys.executable,
        help="the base gateway's interpreter (an environment with its dependencies)",
    )
    parser.add_argument("--this-python", default=sys.executable, help="this gateway's interpreter")
    parser.add_argument(
        "--this-options",
        default="",
        help="route options for this gateway only, e.g. ',tools=allow:echo,rate=100000/s'",
    )
    parser.add_argument(
        "--args", default="", help="more `gateway serve` arguments for both gateways (one string)"
    )
    args = parser.parse_args()
    if not (args.base / "gateway" / "__main__.py").exists():
        parser.error(f"{args.base} is not a checkout of the gateway")
    pythons = (args.base_python, args.this_python)
    base = args.base.resolve()
    extra = shlex.split(args.args)
    options = args.this_options
    asyncio.run(compare(base, args.rounds, args.calls, args.loop, pythons, options, extra))


if __name__ == "__main__":
    main()
