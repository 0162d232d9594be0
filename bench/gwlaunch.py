"""Bench-only launcher of `gateway serve`: optionally on uvloop, optionally under cProfile.

    python -m bench.gwlaunch [--uvloop] [--profile PATH] -- serve --listen ... --route ...

The gateway cannot choose its event loop yet; installing uvloop's policy before
its ``asyncio.run`` makes that run on uvloop, without touching gateway code.
The profile is written when the gateway returns (it does on SIGTERM, after
draining).
"""

from __future__ import annotations

import cProfile
import sys


def main(argv: list[str]) -> None:
    split = argv.index("--")
    options, gateway_args = argv[:split], argv[split + 1 :]
    if "--uvloop" in options:
        import uvloop

        uvloop.install()
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
