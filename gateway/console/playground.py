"""The playground: the console's server side as a real client of a route, on
loopback, speaking the revision the operator picks (the gateway's own upstream
link, pinned to that revision, pointed at the route: so the call goes through the
route's whole inbound path).  A call runs as a task; a question the route puts to
it (an elicitation or a sampling request, asked on the stream in the handshake era,
or as ``input_required`` in the stateless one) waits for the operator's answer."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp

from gateway.console.wiretap import WIRE, Wire, recording_adapters
from gateway.core import (
    Answer,
    Ask,
    AskKind,
    Call,
    ClientContext,
    Exchange,
    Failure,
    InputRequired,
    Operation,
    Outcome,
    ServerProfile,
    Value,
)
from gateway.protocol import ANSWERS_ARGUMENT, STATE_ARGUMENT, AdapterSet, asked_in_result
from gateway.upstream.link import UpstreamLink
from gateway.upstream.settings import UpstreamSettings

__all__ = ["Playground", "Run"]

CLIENT_INFO = {"name": "gateway-console-playground", "version": "1"}
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}}
# Runs kept (the oldest forgotten first), and how long a question waits for an answer.
MAX_RUNS = 32
MAX_RUNNING = 8
ANSWER_TIMEOUT = 300.0
ROUNDS = 8  # input_required rounds one call may take
# How long closing waits for the playground's own upstream sessions to end (seconds).
CLOSE_WITHIN = 2.0


@dataclass
class Run:
    id: str
    route: str
    revision: str
    method: str
    params: dict[str, Any]
    wire: Wire = field(default_factory=list)
    questions: dict[str, Ask] | None = None
    outcome: Outcome | None = None
    error: str | None = None
    _answers: asyncio.Future[dict[str, Answer]] | None = None
    task: asyncio.Task[None] | None = None
    started: float = field(default_factory=time.time)
    # Set whenever the call is asked something or ends (what a form post waits for).
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def done(self) -> bool:
        return self.outcome is not None or self.error is not None

    def answer(self, answers: dict[str, Answer]) -> bool:
        waiting = self._answers
        if waiting is None or waiting.done():
            return False
        waiting.set_result(answers)
        self.questions = None  # now, not when the asker resumes: a page shows it at once
        return True

    async def ask(self, questions: dict[str, Ask]) -> dict[str, Answer]:
        """Put questions to the operator; their answers (bounded wait)."""
        self._answers = asyncio.get_running_loop().create_future()
        self.questions = questions
        self.changed.set()
        try:
            return await asyncio.wait_for(self._answers, ANSWER_TIMEOUT)
        finally:
            self.questions = None
            self._answers = None


class Playground:
    def __init__(self, base: Callable[[], str], adapters: AdapterSet) -> None:
        self.base = base  # the gateway's own loopback URL, e.g. http://127.0.0.1:8080
        self.adapters = recording_adapters(adapters)
        self.runs: OrderedDict[str, Run] = OrderedDict()
        self._links: dict[tuple[str, str], UpstreamLink] = {}
        self._http: aiohttp.ClientSession | None = None
        self._ids = itertools.count(1)

    @property
    def revisions(self) -> list[str]:
        return self.adapters.versions

    def _link(self, route: str, revision: str) -> UpstreamLink:
        link = self._links.get((route, revision))
        if link is None:
            if self._http is None:
                self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
            settings = UpstreamSettings(
                url=self.base() + route,
                transport="auto",
                version=revision,
                route=f"console {route}",
                client_info=dict(CLIENT_INFO),
                client_capabilities=dict(CAPABILITIES),
            )
            link = self._links[(route, revision)] = UpstreamLink(
                settings, self.adapters, self._http
            )
        return link

    def start(self, route: str, revision: str, method: str, params: dict[str, Any]) -> Run | str:
        """A call begun in the background (or why not)."""
        if revision not in self.adapters.by_version:
            return f"unknown revision {revision!r}"
        if sum(1 for run in self.runs.values() if not run.done) >= MAX_RUNNING:
            return "too many playground calls at once"
        run = Run(secrets.token_hex(8), route, revision, method, params)
        self.runs[run.id] = run
        while len(self.runs) > MAX_RUNS:
            _, old = self.runs.popitem(last=False)
            if old.task is not None:
                old.task.cancel()
        run.task = asyncio.get_running_loop().create_task(self._run(run))
        return run

    async def _run(self, run: Run) -> None:
        WIRE.set(run.wire)  # this task's own context: the link's tasks inherit it
        link = self._link(run.route, run.revision)
        call = Call(
            id=next(self._ids),
            operation=Operation.for_method(run.method),
            method=run.method,
            params=run.params,
            client=ClientContext(run.revision, dict(CAPABILITIES), dict(CLIENT_INFO)),
        )

        async def ask(question: Ask) -> Answer | None:
            return (await run.ask({"question": question}))["question"]

        exchange = Exchange(
            call=call, route=run.route, profile=ServerProfile(), principal="console", ask=ask
        )
        try:
            for _ in range(ROUNDS):
                outcome = await link.handle(call, exchange)
                asked = _asked_in_arguments(outcome)
                if isinstance(outcome, InputRequired):
                    answers = await run.ask(outcome.asks)
                    call = replace(call, id=next(self._ids), answers=answers, state=outcome.state)
                elif asked is not None:  # a revision that carries answers in arguments
                    answers = await run.ask(asked.asks)
                    call = replace(
                        call, id=next(self._ids), params=_with_answers(call, asked, answers)
                    )
                else:
                    break
                exchange = replace(exchange, call=call)
            run.outcome = outcome
        except TimeoutError:
            run.error = "no answer in time"
        except Failure as failure:
            run.outcome = failure
        except Exception as exc:  # shown to the operator, never a 500
            run.error = f"{type(exc).__name__}: {exc}"
        finally:
            run.changed.set()

    async def close(self) -> None:
        for run in self.runs.values():
            if run.task is not None:
                run.task.cancel()
        for link in self._links.values():
            # Its sessions are the gateway's own, which is shutting down and may no
            # longer answer their DELETE: not waited for past CLOSE_WITHIN.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_WITHIN):
                    await link.close()
        if self._http is not None:
            await self._http.close()


def _asked_in_arguments(outcome: Outcome) -> InputRequired | None:
    """The questions a tool result asks to have answered in the call's arguments (the
    revisions from before elicitation), as the form shows them."""
    if not isinstance(outcome, Value):
        return None
    asked = asked_in_result(outcome.result)
    if asked is None:
        return None
    questions, state = asked
    asks = {}
    for key, said in questions.items():
        kind = AskKind.for_method(said.get("method")) if isinstance(said, dict) else None
        params = said.get("params") if isinstance(said, dict) else None
        if kind is not None and isinstance(params, dict):
            asks[str(key)] = Ask(kind, params)
    return InputRequired(asks, state) if asks else None


def _with_answers(call: Call, asked: InputRequired, answers: dict[str, Answer]) -> dict[str, Any]:
    """The call's params again, its answers and state in the reserved arguments."""
    arguments = dict(call.params.get("arguments") or {})
    arguments[ANSWERS_ARGUMENT] = {
        key: answer.result if answer.result is not None else {"action": "decline"}
        for key, answer in answers.items()
    }
    arguments[STATE_ARGUMENT] = asked.state
    return {**call.params, "arguments": arguments}
