"""Bench-only launcher of `gateway serve`, optionally under cProfile.

    python -m bench.gwlaunch [--profile PATH] -- serve --listen ... --route ... --loop ...

The event loop is the gateway's own `--loop` setting.  The profile is written
when the gateway returns (it does on SIGTERM, after draining).
"""

from __future__ import annotations

import cProfile
import sys


def main(argv: list[str]) -> None:
    split = argv.index("--")
    options, gateway_args = argv[:split], argv[split + 1 :]
    profile_path = options[options.index("--profile") + 1] if "--profile" in options else None
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
