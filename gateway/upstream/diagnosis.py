"""Why an upstream is not usable, said for its operator: a reason and a hint (what
to do), from the error a probe or a check met.  Shared by `gateway check`, the
start-up summary and the console, so they all say the same thing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from typing import Any

from gateway.core.redaction import safe_url, scrub
from gateway.upstream.settings import UpstreamSettings

__all__ = ["diagnose", "explained"]

# How long a stdio command that failed the probe is watched for its exit code.
EXIT_WATCH = 2.0
_HTTP_STATUS = re.compile(r"HTTP (\d{3})")


async def diagnose(
    message: str, settings: UpstreamSettings, *, rerun: bool = True
) -> tuple[str, str]:
    """(reason, hint) for a failed probe or check: the kinds an operator meets first.
    ``rerun``: a stdio command that failed may be started once more to see its exit
    code and last stderr line (not for a page that checks every few seconds)."""
    if settings.command is not None:
        return await _diagnose_stdio(message, settings, rerun)
    return _diagnose_http(message, settings)


def _diagnose_http(message: str, settings: UpstreamSettings) -> tuple[str, str]:
    where = re.sub(r"^[a-z]+://([^/]*).*$", r"\1", safe_url(settings.url))
    if "WRONG_VERSION_NUMBER" in message or "wrong version number" in message:
        plain = safe_url(settings.url).replace("https://", "http://", 1)
        return "TLS handshake failed: the port speaks plain HTTP", f"use {plain}"
    if "SSL" in message or "certificate" in message.lower():
        return "TLS handshake failed", "check the server's certificate and the https:// URL"
    if "refused the Authorization set by " in message:  # the route's own credentials
        source = message.split("refused the Authorization set by ", 1)[1].split(" (", 1)[0]
        reason = f"the upstream refused the Authorization set by {source}"
        return reason, f"check the secret in {source.split(' ', 1)[-1]}"
    if "connection refused" in message.lower() or "Connect call failed" in message:
        return f"nothing is listening at {where}", "start the server, or check the host and port"
    if "Name or service not known" in message or "nodename nor servname" in message:
        return f"cannot resolve {where}", "check the host name"
    status = _HTTP_STATUS.search(message)
    if status is not None:
        reason = f"not an MCP endpoint (it answered HTTP {status.group(1)})"
        return reason, "check the URL's path: often /mcp, or /sse for the old transport"
    if "no answer" in message or "TimeoutError" in message or "timed out" in message:
        return "no answer in time", "check the server, or raise probe_timeout= / connect_timeout="
    if "speaks no MCP transport" in message:
        reason = "not an MCP endpoint (no MCP answer on any transport)"
        return reason, "check the URL's path: often /mcp, or /sse for the old transport"
    if "not JSON" in message or "content type" in message.lower():
        return "not an MCP endpoint (its answer is not MCP)", "check the URL"
    return scrub(message), ""


async def _diagnose_stdio(message: str, settings: UpstreamSettings, rerun: bool) -> tuple[str, str]:
    assert settings.command is not None
    program = settings.command[0]
    if "No such file or directory" in message or "not found" in message:
        if settings.cwd is not None and f"'{settings.cwd}'" in message:
            return f"the working directory {settings.cwd} does not exist", "check cwd="
        return f"command not found: {program}", "install it, or give its full path"
    if "Permission denied" in message:
        return f"cannot run {program}: permission denied", "make it executable"
    code, line = await _exit_of(settings) if rerun else (None, "")
    if code is not None:
        said = f"; its last stderr line: {line}" if line else ""
        return f"the command exited with code {code}{said}", "run the command by hand to see why"
    if "no answer" in message or "Timeout" in message or not message:
        return "the command runs but gives no MCP answer", "is it an MCP stdio server?"
    return scrub(message), ""


async def _exit_of(settings: UpstreamSettings) -> tuple[int | None, str]:
    """The command started again, watched for EXIT_WATCH seconds: its exit code (None:
    still running) and its last stderr line."""
    assert settings.command is not None
    env = {**os.environ, **settings.env} if settings.env else None
    try:
        proc = await asyncio.create_subprocess_exec(
            *settings.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            cwd=settings.cwd,
            env=env,
        )
    except OSError:
        return None, ""
    assert proc.stderr is not None
    try:  # stdin stays open: an MCP server exits at its end, whatever else is wrong
        stderr, _ = await asyncio.wait_for(
            asyncio.gather(proc.stderr.read(), proc.wait()), EXIT_WATCH
        )
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return None, ""
    if proc.stdin is not None:
        proc.stdin.close()
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return proc.returncode, (lines[-1].strip()[:200] if lines else "")


async def explained(
    check: dict[str, Any], settings: UpstreamSettings, targets: list[UpstreamSettings] | None
) -> dict[str, Any]:
    """A readiness check (``Backend.ready``) with each failure said for its operator
    as well: a ``reason`` and a ``hint`` beside the ``error``, on the route and on
    each target (``targets``: the settings of a route's targets, in order)."""
    check = dict(check)
    if "last_stderr" in check:  # a command that keeps exiting: what it said
        said = check["last_stderr"] or []
        check["reason"] = check["error"]
        check["hint"] = (
            f"its last stderr line: {said[-1]}" if said else "run the command by hand to see why"
        )
    elif not check.get("ready") and "error" in check and "targets" not in check:
        check["reason"], check["hint"] = await diagnose(str(check["error"]), settings, rerun=False)
    rows = []
    for index, row in enumerate(check.get("targets", [])):
        row = dict(row)
        if row.get("reason") and targets is not None and index < len(targets):
            row["error"] = row["reason"]
            row["reason"], row["hint"] = await diagnose(
                str(row["error"]), targets[index], rerun=False
            )
        rows.append(row)
    if rows:
        check["targets"] = rows
    return check
