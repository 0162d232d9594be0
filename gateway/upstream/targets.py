"""Several upstreams of one route (``also=`` URLs, or ``instances=`` stdio children),
seen by the bridge as one link.

Each target is an :class:`UpstreamLink` of its own, with its own verdict (revision,
transport), sessions and pools.  A call that belongs to nothing goes to the usable
target with the fewest calls in flight; what lives on one target stays there: a
client session's own upstream session (and so its parked calls, subscriptions and
notifications), a listen (one long call), an upstream task (its id is remembered
with the target that made it).  Each target's :class:`Health` decides whether it may
take calls; when none may, a call is answered at once (``UPSTREAM_DOWN``, with when
to try again) instead of waiting out its timeout.  A call whose request never left
the gateway (no connection could be made) goes to the next target: it cannot have
run; one that may have reached a server goes to another target once, only where
upstream/retry.py says running it twice cannot harm.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import structlog

from gateway.core import Call, Event, Exchange, Failure, FailureKind, Operation, Outcome, Value
from gateway.core.limits import FairTable
from gateway.protocol import adapter_of
from gateway.upstream import retry
from gateway.upstream.health import Health, Readmit, State, counts_against
from gateway.upstream.link import UpstreamLink, Verdict
from gateway.upstream.settings import UpstreamSettings

log = structlog.get_logger(__name__)

TASK_OPERATIONS = frozenset(
    {
        Operation.TASKS_GET,
        Operation.TASKS_RESULT,
        Operation.TASKS_CANCEL,
        Operation.TASKS_UPDATE,
    }
)
# Upstream task ids remembered with their target: in all, and per principal (a flood
# of one caller's tasks forgets its own oldest, never another's).
MAX_TASKS = 10_000
MAX_TASKS_PER_PRINCIPAL = 1_000
DEFAULT_CHECK_EVERY = 5.0
DEFAULT_CHECK_WITHIN = 3.0
# A round of checks this recent stands for a new one: /readyz scraped often (or by
# several scrapers) does not open a connection to every target each time.
FRESH_CHECKS = 1.0


OTHER_ERA = "it speaks another protocol era than the route's other targets"
# A client session whose target is out: what its client is told (with its 404).
SESSION_GONE = "Session not found: its server is gone; start a new session"


# The operations whose success shows the target doing work (its tools, resources,
# prompts answering), not only answering.
WORK = frozenset(
    {
        Operation.TOOLS_CALL,
        Operation.RESOURCES_READ,
        Operation.PROMPTS_GET,
        Operation.COMPLETE,
        Operation.TASKS_RESULT,
    }
)


class Targets:
    """The targets of one route.  Safe for many concurrent calls."""

    def __init__(
        self,
        links: list[UpstreamLink],
        *,
        check_every: float = DEFAULT_CHECK_EVERY,
        check_within: float = DEFAULT_CHECK_WITHIN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if len(links) < 2:
            raise ValueError("Targets are for a route with several upstreams")
        self.links = links
        for link in links:
            link.retrying = False  # sent again here, to another target where it can be
        self.health = [Health() for _ in links]
        self.outstanding = [0] * len(links)
        self.check_every, self.check_within = check_every, check_within
        self._clock = clock
        self._round: asyncio.Future[None] | None = None  # the round of checks under way
        self._checked_at = -math.inf
        self._pins: dict[str, int] = {}  # a client session's key -> its target
        self._task_targets: dict[str, int] = {}
        self._tasks: FairTable[str] = FairTable(
            "upstream tasks",
            MAX_TASKS,
            MAX_TASKS_PER_PRINCIPAL,
            idle=lambda _: True,
            end=self._forget_task,
        )
        self._turn = 0  # ties go round
        self._checker: asyncio.Task[None] | None = None

    # ------------------------------------------------ what the bridge reads

    @property
    def settings(self) -> UpstreamSettings:
        return self.links[0].settings

    @property
    def verdict(self) -> Verdict | None:
        return next((link.verdict for link in self.links if link.verdict is not None), None)

    @property
    def stateless(self) -> bool:
        verdict = self.verdict
        return verdict is not None and not verdict.adapter.has_handshake

    # ------------------------------------------------------ choosing one

    def _pick(
        self, skip: set[int] | frozenset[int] = frozenset(), *, turn: bool = True
    ) -> int | None:
        """The usable target with the fewest calls in flight, ties going round (None:
        none is usable); ``turn``: a call goes there (a question about it does not
        move the turn, or every call would land where the question did)."""
        now = self._clock()
        usable = [
            i
            for i, h in enumerate(self.health)
            if i not in skip
            and h.usable(now)
            and not (h.state is State.TRIAL and self.outstanding[i])  # one trial at a time
        ]
        if not usable:
            return None
        self._turn += turn
        return min(usable, key=lambda i: (self.outstanding[i], (i - self._turn) % len(self.links)))

    def _held(self, call: Call | None, exchange: Exchange) -> int | None:
        """The target that holds what ``call`` belongs to (None: it may go anywhere)."""
        downstream = exchange.downstream
        if downstream is not None and not self.stateless:
            pinned = self._pins.get(downstream.key)
            if pinned is None:
                pinned = self._pick()
                if pinned is not None:
                    self._pins[downstream.key] = pinned
            return pinned
        client = adapter_of(call.client) if call is not None else None
        if call is not None and client is not None and call.operation in TASK_OPERATIONS:
            task_id = client.task_id(call.params)  # as the client's revision says it
            if isinstance(task_id, str):
                return self._task_targets.get(task_id)
        return None

    def _gone(self, index: int) -> bool:
        """The target is out (ejected, its back-off not over, or taken back only by a
        check): what it held is not to be had now."""
        health = self.health[index]
        return not health.usable(self._clock()) or health.readmit is Readmit.CHECK

    def _trial_busy(self, index: int) -> bool:
        health = self.health[index]
        return (
            health.usable(self._clock())
            and health.state is State.TRIAL
            and self.outstanding[index] > 0
        )

    def down(self) -> Failure:
        """Every target is out: when the first may be tried again."""
        now = self._clock()
        wait = min(h.retry_after(now) for h in self.health)
        return Failure(
            FailureKind.UPSTREAM_DOWN,
            f"every upstream of this route is down ({len(self.links)} targets)",
            headers={"Retry-After": str(wait)},
        )

    # ------------------------------------------------------------ calls

    async def handle(self, call: Call, exchange: Exchange) -> Outcome:
        held = self._held(call, exchange)
        downstream = exchange.downstream
        pinned = downstream is not None and self._pins.get(downstream.key) == held
        if held is not None and pinned and not self.stateless and self._gone(held):
            # The client's session lives on a target that is out: the session is over,
            # said as its revision says it (404), so its next initialize lands on a
            # target that is in (its end, below, ends the upstream one too).
            return Failure(FailureKind.SESSION_NOT_FOUND, SESSION_GONE)
        if held is not None and self._trial_busy(held):
            # One trial call at a time, a session's too: not sent, sent again shortly.
            return Failure(
                FailureKind.UPSTREAM_UNAVAILABLE,
                "its target is being tried again after failing (one call at a time)",
                headers={"Retry-After": "1"},
            )
        if held is not None:
            return await self._sent(held, call, exchange)
        if exchange.downstream is not None and not self.stateless:
            return self.down()  # a new session's call, and no target to open it on
        safe = self._safe(exchange.principal, call)
        watch = retry.watched(call, exchange, safe)
        tried: set[int] = set()
        outcome: Outcome = self.down()
        again = True  # one more after a failure that may have reached a server
        while (index := self._pick(tried)) is not None:
            tried.add(index)
            outcome = await self._on(index, call, watch.exchange if watch else exchange)
            if not isinstance(outcome, Failure):
                break
            asked = bool(watch and watch.asked)
            why = retry.send_again(call, outcome, tool_is_safe=safe, asked=asked)
            if why is None or (why != retry.NEVER_SENT and not again):
                break
            again = again and why == retry.NEVER_SENT
            self.links[index].note_retry(call, why)  # to the next usable target
        self._remember_task(index if tried else None, outcome, exchange.principal)
        return outcome

    async def _sent(self, index: int, call: Call, exchange: Exchange) -> Outcome:
        """A call that must go to one target: sent once more there where that is safe."""
        safe = self._safe(exchange.principal, call)
        return await retry.once_more(call, exchange, safe, _OnTarget(self, index))

    def _safe(self, principal: str, call: Call) -> bool:
        """The tool says running it twice does no harm, in a list this principal read
        through any target (the targets are copies of one server)."""
        return any(link.tool_is_safe(principal, call) for link in self.links)

    async def _on(self, index: int, call: Call, exchange: Exchange) -> Outcome:
        self.outstanding[index] += 1
        try:
            outcome = await self.links[index].handle(call, exchange)
        finally:
            self.outstanding[index] -= 1
        self._judge(index, outcome, call.operation)
        return outcome

    def _judge(self, index: int, outcome: Outcome, operation: Operation | None = None) -> None:
        health, now = self.health[index], self._clock()
        if isinstance(outcome, Failure) and not counts_against(outcome):
            if health.state is State.IN:  # an answer, but no success to take it back by
                health.succeeded(now)
            return
        if isinstance(outcome, Failure):
            was = health.state
            # Out for time-outs: a check its hanging tools would pass (a ping answers)
            # does not take it back, only a call that succeeds.
            slow = outcome.kind is FailureKind.UPSTREAM_TIMEOUT
            health.failed(now, outcome.message, readmit=Readmit.CALL if slow else Readmit.ANY)
            if health.state is State.OUT and was is not State.OUT:
                self._ejected(index, outcome.message, now)
        else:
            # A list answers while the tools hang: only work done takes back a target
            # out for time-outs (a listing counts as much as a check).
            work = operation is None or operation in WORK
            health.succeeded(now, Readmit.CALL if work else Readmit.CHECK)

    def _ejected(self, index: int, reason: str, now: float) -> None:
        log.warning(
            "upstream target ejected",
            route=self.settings.route,
            target=self.name(index),
            reason=reason,
            retry_in=self.health[index].retry_after(now),
        )

    def _forget_task(self, task_id: str) -> None:
        self._task_targets.pop(task_id, None)

    def _remember_task(self, index: int | None, outcome: Outcome, principal: str) -> None:
        if index is None or not isinstance(outcome, Value):
            return
        verdict = self.links[index].verdict
        if verdict is None:
            return
        # The upstream's created task, read by its revision's adapter.
        task = verdict.adapter.client_read_created_task(outcome.result)
        if task is not None:
            task_id = task.id
            self._tasks.keep(principal, task_id)
            if self._tasks.owner_of(task_id) == principal:
                self._task_targets[task_id] = index

    # ------------------------------------------ a client session's own upstream

    async def open(self, exchange: Exchange) -> Failure | None:
        index = self._held(None, exchange)
        if index is None:
            return self.down()
        return await self.links[index].open(exchange)

    async def end(self, exchange: Exchange) -> None:
        downstream = exchange.downstream
        index = self._pins.pop(downstream.key, None) if downstream is not None else None
        if index is not None:
            await self.links[index].end(exchange)

    async def notify(self, call: Call, exchange: Exchange) -> None:
        index = self._held(call, exchange)
        chosen = [self.links[index]] if index is not None else self.links  # pools: every one
        for link in chosen:
            await link.notify(call, exchange)

    def _for(self, call: Call | None, exchange: Exchange) -> UpstreamLink:
        """The link a call that needs one answer (a list, a scope) asks."""
        index = self._held(call, exchange)
        if index is None:
            index = self._pick(turn=False)
        return self.links[index if index is not None else 0]

    def scope(self, exchange: Exchange) -> str:
        return self._for(None, exchange).scope(exchange)

    async def attach(self, exchange: Exchange) -> None:
        await self._for(None, exchange).attach(exchange)

    def listen(self, call: Call, exchange: Exchange) -> AsyncIterator[Event]:
        return self._for(call, exchange).listen(call, exchange)

    async def task_support(self, call: Call, exchange: Exchange) -> str | None:
        return await self._for(call, exchange).task_support(call, exchange)

    async def declared_headers(
        self, call: Call, exchange: Exchange
    ) -> dict[tuple[str, ...], str] | None:
        return await self._for(call, exchange).declared_headers(call, exchange)

    async def ensure(self, principal: str, headers: Mapping[str, str]) -> Verdict:
        """A usable target's verdict (the route's profile is read from it)."""
        tried: set[int] = set()
        while (index := self._pick(tried)) is not None:
            tried.add(index)
            try:
                return await self.links[index].ensure(principal, headers)
            except Failure as failure:
                if not counts_against(failure):
                    raise
                self.health[index].failed(self._clock(), failure.message, at_once=True)
        raise self.down()

    # ------------------------------------------------------ active checks

    def start(self) -> None:
        """Check every target every ``check_every`` seconds (needs a running loop)."""
        if self._checker is None:
            self._checker = asyncio.get_running_loop().create_task(self._checks())

    async def _checks(self) -> None:
        while True:
            try:
                await self.check_all()
            except Exception as exc:  # the next round still comes
                log.warning(
                    "upstream target checks failed", route=self.settings.route, error=repr(exc)
                )
            await asyncio.sleep(self.check_every)

    async def check_all(self) -> None:
        """Every target checked: by the round under way, or the last one if it is
        fresh (under ``FRESH_CHECKS`` s, and under ``check_every``), else a new one."""
        if self._round is None or self._round.done():
            if self._clock() - self._checked_at < min(FRESH_CHECKS, self.check_every):
                return
            self._round = asyncio.ensure_future(self._check_round())
        await asyncio.shield(self._round)  # one caller leaving does not stop the round

    async def _check_round(self) -> None:
        await asyncio.gather(*(self.check(i) for i in range(len(self.links))))
        self._checked_at = self._clock()

    async def check(self, index: int) -> None:
        """One active check: the target is reachable and speaks the route's era."""
        health, link = self.health[index], self.links[index]
        if health.state is State.OUT and self._clock() < health.until:
            return  # its back-off runs: tried once it has passed
        problem = await self._problem(link)
        now = self._clock()
        # Another era is cleared only by a check that finds the route's era again.
        readmit = Readmit.CHECK if problem == OTHER_ERA else Readmit.ANY
        if problem is None:
            if health.state is not State.IN:  # re-admitted; a target that is in keeps
                health.succeeded(now, Readmit.CHECK)  # its calls' failures (slow, 5xx)
        elif health.state is not State.OUT:
            health.failed(now, problem, at_once=True, readmit=readmit)
            self._ejected(index, problem, now)
        else:  # still down: out for longer
            health.failed(now, problem, at_once=True, readmit=readmit)

    async def _problem(self, link: UpstreamLink) -> str | None:
        try:  # an MCP request in the target's revision, bounded: it answers MCP
            await asyncio.wait_for(link.ping(), self.check_within)
        except Failure as failure:
            if failure.kind in (FailureKind.UNAUTHORIZED, FailureKind.FORBIDDEN):
                return self._era_of(link)  # it answers; it wants the client's credentials
            if not counts_against(failure):
                return self._era_of(link)  # a JSON-RPC answer (no ping there): it answers
            return failure.message
        except (TimeoutError, OSError) as exc:
            return str(exc) or type(exc).__name__
        except Exception as exc:  # a check must never end the loop of checks
            log.warning("upstream target check failed", route=self.settings.route, error=repr(exc))
            return type(exc).__name__
        return self._era_of(link)

    def _era_of(self, link: UpstreamLink) -> str | None:
        """OTHER_ERA when ``link`` speaks another era than the route's: the era most of
        its targets of known era speak (on a tie, the first such target's); a link out
        for its era and still of unknown era is not taken back on trust."""
        own = link.verdict
        if own is None:
            index = self.links.index(link)
            return OTHER_ERA if self.health[index].readmit is Readmit.CHECK else None
        eras = [t.verdict.adapter.has_handshake for t in self.links if t.verdict is not None]
        route_era = max(dict.fromkeys(eras), key=eras.count)  # a tie: the first one's
        if own.adapter.has_handshake != route_era:
            link.forget()  # its next check probes it again: it may have been fixed
            return OTHER_ERA
        return None

    # ------------------------------------------------------ for operators

    def name(self, index: int) -> str:
        settings = self.links[index].settings
        if settings.command is not None:
            return f"instance {index + 1}"
        parts = urlsplit(settings.url)
        return f"{parts.scheme}://{parts.hostname}:{parts.port or ''}{parts.path}"

    def states(self) -> list[dict[str, Any]]:
        now = self._clock()
        rows = []
        for index, health in enumerate(self.health):
            health.usable(now)
            row: dict[str, Any] = {
                "target": self.name(index),
                "state": health.state.value,
                "in_flight": self.outstanding[index],
                "ejections": health.ejected_total,
            }
            if health.state is State.OUT:
                row["retry_in"] = health.retry_after(now)
                row["reason"] = health.reason
            rows.append(row)
        return rows

    def pool_counts(self) -> tuple[int, int]:
        counts = [link.pool_counts() for link in self.links]
        return sum(c[0] for c in counts), sum(c[1] for c in counts)

    def session_count(self) -> int:
        return sum(link.session_count() for link in self.links)

    def tool_index_restarts(self) -> int:
        return sum(link.tool_index_restarts() for link in self.links)

    @property
    def retries(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for link in self.links:
            for why, count in link.retries.items():
                total[why] = total.get(why, 0) + count
        return total

    async def close(self) -> None:
        for task in (self._checker, self._round):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await asyncio.gather(*(link.close() for link in self.links), return_exceptions=True)


@dataclass(frozen=True, slots=True)
class _OnTarget:
    """One target as a :class:`retry.Sender`: a call that must go to it is sent again
    there, and its retries are counted on it."""

    targets: Targets
    index: int

    async def send_once(self, call: Call, exchange: Exchange) -> Outcome:
        return await self.targets._on(self.index, call, exchange)

    def note_retry(self, call: Call, why: str) -> None:
        self.targets.links[self.index].note_retry(call, why)
