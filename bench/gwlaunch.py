"""Bench-only launcher of `gateway serve`, optionally under cProfile or the path tracer.

    python -m bench.gwlaunch [--profile PATH] [--trace PATH] [--tracemalloc PATH]
                             [--gc-signal] [--patch MODULE:NAME=VALUE ...] \
                             -- serve --listen ... --loop ...

The event loop is the gateway's own `--loop` setting.  The profile is written
when the gateway returns (it does on SIGTERM, after draining).  ``--trace``
installs `bench.pathtrace` (SIGUSR1 / SIGUSR2 switch it on and off).
``--tracemalloc PATH`` traces allocations from the start (10 frames) and writes a
snapshot to PATH.N on each SIGUSR1 (N = 1, 2, ...), as `bench.idle --profile` reads.
``--gc-signal`` makes SIGUSR2 run a full garbage collection (`bench.idle` asks, to
tell memory held by cyclic garbage not yet collected from memory the allocator keeps);
with ``--gc-report PATH`` it first writes what that garbage was (types, counted) to PATH.
``--patch`` sets a module constant before the gateway starts (a bound that has
no setting, e.g. ``gateway.upstream.sessions:POOL_IDLE=30``): the bench's
business only, nothing in ``gateway/`` knows.
"""

from __future__ import annotations

import ast
import cProfile
import gc
import importlib
import signal
import sys
import tracemalloc
from collections import Counter
from pathlib import Path
from types import FrameType


def _options(options: list[str], name: str) -> list[str]:
    return [options[i + 1] for i, option in enumerate(options[:-1]) if option == name]


def patch(spec: str) -> None:
    """``MODULE:NAME=VALUE``: the module's constant NAME set to the Python literal VALUE."""
    target, _, value = spec.partition("=")
    module_name, _, name = target.partition(":")
    module = importlib.import_module(module_name)
    if not hasattr(module, name):
        raise SystemExit(f"--patch {spec}: {module_name} has no {name}")
    setattr(module, name, ast.literal_eval(value))


def trace_allocations(path: Path) -> None:
    tracemalloc.start(10)
    taken = [0]

    def snapshot(signum: int, frame: FrameType | None) -> None:
        taken[0] += 1
        tracemalloc.take_snapshot().dump(f"{path}.{taken[0]}")

    signal.signal(signal.SIGUSR1, snapshot)


def collect_on_signal(report: Path | None) -> None:
    """SIGUSR2: a full collection; with ``report``, what it found (cyclic garbage: the
    count of each type, most first) is written there first."""

    def collect(signum: int, frame: FrameType | None) -> None:
        if report is None:
            gc.collect()
            return
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            kinds = Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage)
        finally:
            gc.garbage.clear()
            gc.set_debug(0)
        report.write_text("".join(f"{n} {kind}\n" for kind, n in kinds.most_common(40)))

    signal.signal(signal.SIGUSR2, collect)


def main(argv: list[str]) -> None:
    split = argv.index("--")
    options, gateway_args = argv[:split], argv[split + 1 :]
    profile_path = options[options.index("--profile") + 1] if "--profile" in options else None
    if "--trace" in options:
        from bench.pathtrace import install

        install(Path(options[options.index("--trace") + 1]))
    for spec in _options(options, "--tracemalloc"):
        trace_allocations(Path(spec))
    if "--gc-signal" in options:
        reports = _options(options, "--gc-report")
        collect_on_signal(Path(reports[0]) if reports else None)
    for spec in _options(options, "--patch"):
        patch(spec)
    sys.argv = ["gateway", *gateway_args]
    from gateway.process.cli import app

    if profile_path is None:
        app()
        return
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        app()
    finally:
        profiler.disable()
        profiler.dump_stats(profile_path)


if __name__ == "__main__":
    main(sys.argv[1:])
