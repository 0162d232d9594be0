"""Bench-only launcher of `gateway serve`, optionally under cProfile or the path tracer.

    python -m bench.gwlaunch [--profile PATH] [--trace PATH] -- serve --listen ... --loop ...

The event loop is the gateway's own `--loop` setting.  The profile is written
when the gateway returns (it does on SIGTERM, after draining).  ``--trace``
installs `bench.pathtrace` (SIGUSR1 / SIGUSR2 switch it on and off).
"""

from __future__ import annotations

import cProfile
import sys
from pathlib import Path


def main(argv: list[str]) -> None:
    split = argv.index("--")
    options, gateway_args = argv[:split], argv[split + 1 :]
    profile_path = options[options.index("--profile") + 1] if "--profile" in options else None
    if "--trace" in options:
        from bench.pathtrace import install

        install(Path(options[options.index("--trace") + 1]))
    sys.argv = ["gateway", *gateway_args]
    from gateway.cli import app

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
