"""A route's verdict for its operator: is its upstream reachable and what does it
speak, or what is wrong and how to fix it.  `gateway check --reach` prints them, and
`gateway serve` logs one line per route at start and whenever one changes.

A route has one target today; :class:`RouteVerdict` holds a list so that a route
with several upstreams (failover) gives a verdict per target.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.bridge.backend import Backend
from gateway.core import Failure, FailureKind
from gateway.core.redaction import safe_command, safe_url, scrub
from gateway.upstream.carriers.crashes import Crashes
from gateway.upstream.link import UpstreamLink, UpstreamSettings
from gateway.upstream.reach import spawnable

# How long a stdio command that failed the probe is watched for its exit code.
EXIT_WATCH = 2.0
# The startup summary: how long one route's check may take, and how often the routes
# are checked again (a line is logged only when a verdict changes).
WATCH_TIMEOUT = 10.0
WATCH_INTERVAL = 10.0
# How the verdict names a transport the probe found.
TRANSPORT_NAMES = {"http": "streamable-http", "sse": "http+sse", "stdio": "stdio"}
_HTTP_STATUS = re.compile(r"HTTP (\d{3})")


@dataclass
class TargetVerdict:
    """One upstream of a route: what it speaks, or why it cannot be used."""

    upstream: str  # for the operator only: a URL (no userinfo) or the command
    transport: str = ""
    revision: str = ""
    problem: str = ""
    hint: str = ""
    note: str = ""
    stateless: bool | None = field(default=None, repr=False)  # its era, once reached

    @property
    def ok(self) -> bool:
        return not self.problem

    def text(self) -> str:
        if self.ok:
            found = f"{self.transport} {self.revision}".strip() or "configured (not reached)"
            return f"{self.upstream}: ok, {found}" + (f" ({self.note})" if self.note else "")
        return f"{self.upstream}: {self.problem}" + (f" -- {self.hint}" if self.hint else "")

    def fields(self) -> dict[str, Any]:
        """The verdict as log fields."""
        found = {"transport": self.transport, "revision": self.revision, "note": self.note}
        bad = {"reason": self.problem, "hint": self.hint}
        chosen = bad if self.problem else found
        return {"upstream": self.upstream, **{k: v for k, v in chosen.items() if v}}


@dataclass
class RouteVerdict:
    path: str
    targets: list[TargetVerdict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(target.ok for target in self.targets)

    def text(self) -> str:
        mark = "ok  " if self.ok else "FAIL"
        return f"{mark} {self.path}  " + "; ".join(t.text() for t in self.targets)


def upstream_name(settings: UpstreamSettings) -> str:
    """The upstream as its operator wrote it, less its secrets (a URL's user info and
    query values, a command's secret options)."""
    if settings.command is not None:
        return shlex.join(safe_command(settings.command))
    return safe_url(settings.url)


def unstartable(settings: UpstreamSettings) -> str | None:
    """Why a stdio target's command could not be started now (not on PATH, not
    executable, no such working directory), found without starting it; else None."""
    if settings.command is None:
        return None
    try:
        spawnable(settings.command, settings.cwd, settings.env)
    except OSError as exc:
        return f"{exc} -- install it, give its full path, or check cwd="
    return None


def startable(path: str, targets: list[UpstreamSettings]) -> tuple[str, bool]:
    """`gateway check`'s line for a route not reached: each target valid, or why its
    command could not be started; and whether all can be."""
    said = [(upstream_name(t), unstartable(t)) for t in targets]
    ok = all(problem is None for _, problem in said)
    names = "; ".join(f"{name}: {problem or 'valid'}" for name, problem in said)
    return f"{'ok  ' if ok else 'FAIL'} {path}  {names}", ok


async def reach(link: UpstreamLink, within: float) -> TargetVerdict:
    """Probe the link's upstream (bounded) and say what it is, or what is wrong."""
    settings = link.settings
    verdict = TargetVerdict(upstream_name(settings))
    try:
        found = await asyncio.wait_for(link.ensure("anonymous", {}), within)
    except Failure as failure:
        status = failure.data.get("status") if isinstance(failure.data, dict) else None
        refused = failure.kind in (FailureKind.UNAUTHORIZED, FailureKind.FORBIDDEN) or (
            failure.kind is FailureKind.UPSTREAM_REFUSED and status in (401, 403)
        )
        if refused and settings.credentials_from:  # the route's own credentials
            source = settings.credentials_from
            verdict.problem = f"the upstream refused the Authorization set by {source}"
            verdict.hint = f"check the secret in {source.split(' ', 1)[1]}"
            return verdict
        if refused:
            verdict.note = "reachable; it wants the client's credentials"
            return verdict
        verdict.problem, verdict.hint = await diagnose(str(failure.message), settings)
    except (TimeoutError, OSError, ValueError) as exc:
        verdict.problem, verdict.hint = await diagnose(str(exc) or type(exc).__name__, settings)
    else:
        verdict.transport = TRANSPORT_NAMES.get(found.transport, found.transport)
        verdict.revision = found.adapter.version
        verdict.stateless = not found.adapter.has_handshake
    return verdict


def judged_together(targets: list[TargetVerdict]) -> list[TargetVerdict]:
    """A route's targets are copies of one server: a target that speaks another era
    than most of them (the first one reached, on a tie) is a problem of the route."""
    eras = [t.stateless for t in targets if t.ok and t.stateless is not None]
    if len(set(eras)) < 2:
        return targets
    route_era = max(dict.fromkeys(eras), key=eras.count)
    for target in targets:
        if target.ok and target.stateless is not None and target.stateless != route_era:
            target.problem = "it speaks another protocol era than the route's other targets"
            target.hint = "every target of a route must be a copy of the same server"
    return targets


async def diagnose(message: str, settings: UpstreamSettings) -> tuple[str, str]:
    """(reason, hint) for a failed probe: the kinds an operator meets first."""
    if settings.command is not None:
        return await _diagnose_stdio(message, settings)
    return _diagnose_http(message, settings)


def _diagnose_http(message: str, settings: UpstreamSettings) -> tuple[str, str]:
    where = re.sub(r"^[a-z]+://([^/]*).*$", r"\1", safe_url(settings.url))
    if "WRONG_VERSION_NUMBER" in message or "wrong version number" in message:
        plain = safe_url(settings.url).replace("https://", "http://", 1)
        return "TLS handshake failed: the port speaks plain HTTP", f"use {plain}"
    if "SSL" in message or "certificate" in message.lower():
        return "TLS handshake failed", "check the server's certificate and the https:// URL"
    if "refused" in message.lower() or "Connect call failed" in message:
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


def crash_loop(settings: UpstreamSettings, crashes: Crashes) -> TargetVerdict:
    """A stdio route whose command keeps exiting: how often in a row, what it said."""
    verdict = TargetVerdict(upstream_name(settings))
    verdict.problem = f"the command keeps exiting ({crashes.failures} times in a row)"
    said = crashes.last_said()
    verdict.hint = (
        f"its last stderr line: {said[-1]}" if said else "run the command by hand to see why"
    )
    return verdict


async def _diagnose_stdio(message: str, settings: UpstreamSettings) -> tuple[str, str]:
    assert settings.command is not None
    program = settings.command[0]
    if "No such file or directory" in message or "not found" in message:
        if settings.cwd is not None and f"'{settings.cwd}'" in message:
            return f"the working directory {settings.cwd} does not exist", "check cwd="
        return f"command not found: {program}", "install it, or give its full path"
    if "Permission denied" in message:
        return f"cannot run {program}: permission denied", "make it executable"
    code, line = await _exit_of(settings)
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


async def reach_all(
    routes: list[tuple[str, list[UpstreamLink]]], within: float
) -> list[RouteVerdict]:
    """Every route's verdict, each target of each probed at once."""

    async def one(path: str, links: list[UpstreamLink]) -> RouteVerdict:
        found = await asyncio.gather(*(reach(link, within) for link in links))
        return RouteVerdict(path, judged_together(list(found)))

    return list(await asyncio.gather(*(one(path, links) for path, links in routes)))


async def watch(
    routes: Sequence[tuple[str, Backend]],
    say: Callable[[RouteVerdict], None],
    *,
    within: float = WATCH_TIMEOUT,
    every: float = WATCH_INTERVAL,
) -> None:
    """Say every route's verdict now, then again whenever one changes (checked every
    ``every`` seconds: a probe while the upstream's era is unknown, else /readyz's
    cheaper check).  Runs until cancelled."""
    said: dict[str, str] = {}
    while True:
        verdicts = await asyncio.gather(*(_verdict(path, b, within) for path, b in routes))
        for verdict in verdicts:
            text = verdict.text()
            if said.get(verdict.path) != text:
                said[verdict.path] = text
                say(verdict)
        await asyncio.sleep(every)


async def _verdict(path: str, backend: Backend, within: float) -> RouteVerdict:
    link = backend.link
    crashes = link.crashes
    if link.verdict is None and crashes is not None and crashes.delay(time.monotonic()) > 0:
        # Its command keeps exiting: said from what its children left, not by starting
        # it again before its back-off is over (the watch would restart it forever).
        return RouteVerdict(path, [crash_loop(link.settings, crashes)])
    if backend.targets is not None:
        found = await asyncio.gather(*(reach(t, within) for t in backend.targets.links))
        return RouteVerdict(path, judged_together(list(found)))
    if link.verdict is None:
        return RouteVerdict(path, [await reach(link, within)])
    check = await backend.ready(within)
    target = TargetVerdict(upstream_name(link.settings))
    if check["ready"]:
        target.transport = TRANSPORT_NAMES.get(check["transport"], check["transport"])
        target.revision = check["upstream_revision"]
    else:
        target.problem, target.hint = await diagnose(check["error"], link.settings)
    return RouteVerdict(path, [target])
