"""Whether an upstream could be used now, without speaking MCP to it: its port takes
connections, or its command names an executable (readiness, and each target's check)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Mapping
from urllib.parse import urlsplit


def spawnable(command: list[str], cwd: str | None, env: Mapping[str, str] | None = None) -> None:
    """Raise unless ``command`` names an executable that could be started now."""
    if cwd is not None and not os.path.isdir(cwd):
        raise OSError(f"the working directory {cwd!r} does not exist")
    program = command[0]
    if os.sep in program:
        path = program if os.path.isabs(program) else os.path.join(cwd or os.getcwd(), program)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise OSError(f"{program!r} is not an executable file")
        return
    search = (env or {}).get("PATH", os.environ.get("PATH", os.defpath))
    if shutil.which(program, path=search) is None:
        raise OSError(f"{program!r} is not found on PATH")


async def connectable(url: str) -> None:
    """Open (and close) a TCP connection to the URL's host and port (OSError: it could
    not be, a host name no resolver takes included)."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        _, writer = await asyncio.open_connection(parts.hostname, port)
    except (ValueError, UnicodeError) as exc:
        raise OSError(f"cannot connect: {type(exc).__name__}") from None
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
