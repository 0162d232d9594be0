"""The gateway's demo server in a process of its own (a handshake-era upstream that
asks mid-call: its `greet_me` elicits a name), for the security tests.

    python -m tests.security.demo_upstream PORT     # prints "ready URL" once listening
"""

from __future__ import annotations

import asyncio
import sys

from gateway.demo import start_demo


async def _main(port: int) -> None:
    _, url = await start_demo(port=port)
    print("ready", url, flush=True)
    await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    asyncio.run(_main(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
