"""A route's verdict for its operator: is its upstream reachable and what does it
speak, or what is wrong and how to fix it.  `gateway check --reach` prints them, and
`gateway serve` logs one line per route at start and whenever one changes.

A route has one target today; :class:`RouteVerdict` holds a list so that a route
with several upstreams (failover) gives a verdict per target.
"""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from gateway.bridge.backend import Backend
from gateway.core import Failure, FailureKind
from gateway.core.redaction import safe_command, safe_url
from gateway.upstream.carriers.crashes import Crashes
from gateway.upstream.diagnosis import diagnose
from gateway.upstream.link import UpstreamLink, UpstreamSettings
from gateway.upstream.reach import spawnable

log = structlog.get_logger(__name__)
# The startup summary: how long one route's check may take, and how often the routes
# are checked again (a line is logged only when a verdict changes).
WATCH_TIMEOUT = 10.0
WATCH_INTERVAL = 10.0


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
        refused = failure.kind in (
            FailureKind.UNAUTHORIZED,
            FailureKind.FORBIDDEN,
            FailureKind.UPSTREAM_CREDENTIALS,
        ) or (failure.kind is FailureKind.UPSTREAM_REFUSED and status in (401, 403))
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
        verdict.transport = found.transport
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


def crash_loop(settings: UpstreamSettings, crashes: Crashes) -> TargetVerdict:
    """A stdio route whose command keeps exiting: how often in a row, what it said."""
    verdict = TargetVerdict(upstream_name(settings))
    verdict.problem = f"the command keeps exiting ({crashes.failures} times in a row)"
    said = crashes.last_said()
    verdict.hint = (
        f"its last stderr line: {said[-1]}" if said else "run the command by hand to see why"
    )
    return verdict


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
        target.transport = check["transport"]
        target.revision = check["upstream_revision"]
    else:
        target.problem, target.hint = await diagnose(check["error"], link.settings)
    return RouteVerdict(path, [target])


def say_in_log(verdict: RouteVerdict) -> None:
    """The startup summary's line for a route (what :func:`watch` says, in the log)."""
    for target in verdict.targets:
        if target.ok:
            log.info("route ready", route=verdict.path, **target.fields())
        else:
            log.warning("route broken", route=verdict.path, **target.fields())
