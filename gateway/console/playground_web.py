"""The playground's pages and form posts (behind the console's token, CSRF check and
rate limit, like every console request)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from aiohttp import web
from multidict import MultiDictProxy

from gateway.console import playground_pages as html
from gateway.console.playground import Playground, Run
from gateway.core import Answer, AskKind

__all__ = ["PlaygroundWeb"]

LIST_TIMEOUT = 30.0
LISTS = (("tools", "tools/list"), ("resources", "resources/list"), ("prompts", "prompts/list"))


class FormError(ValueError):
    """A form field that cannot be used (shown to the operator)."""


class PlaygroundWeb:
    def __init__(
        self,
        playground: Playground,
        routes: Callable[[], list[str]],
        page: Callable[[str, str], web.Response],
        upstream_of: Callable[[Run], str | None],
    ) -> None:
        self.playground = playground
        self.routes = routes
        self.page = page
        self.upstream_of = upstream_of

    def register(self, app: web.Application) -> None:
        app.router.add_get("/playground", self.index)
        app.router.add_post("/playground/list", self.list)
        app.router.add_post("/playground/call", self.call)
        app.router.add_get("/playground/run/{id}", self.show)
        app.router.add_post("/playground/run/{id}/answer", self.answer)

    async def index(self, request: web.Request) -> web.Response:
        return self.page("Playground", html.picker(self.routes(), self.playground.revisions))

    def _route(self, form: Mapping[str, Any]) -> str:
        route = str(form.get("route", ""))
        if route not in self.routes():
            raise FormError(f"no route {route!r}")
        return route

    async def list(self, request: web.Request) -> web.Response:
        form = await request.post()
        try:
            route, revision = self._route(form), str(form.get("revision", ""))
        except FormError as exc:
            return _fragment(f"<p class=failure>{exc}</p>")
        found: dict[str, Any] = {}
        for what, method in LISTS:
            run = self.playground.start(route, revision, method, {})
            if isinstance(run, str):
                return _fragment(f"<p class=failure>{run}</p>")
            assert run.task is not None
            await asyncio.wait({run.task}, timeout=LIST_TIMEOUT)
            outcome = run.outcome
            value = getattr(outcome, "result", None)
            found[what] = value if isinstance(value, dict) else _why(run)
        return _fragment(html.lists(route, revision, found))

    async def call(self, request: web.Request) -> web.Response:
        form = await request.post()
        try:
            route = self._route(form)
            method = str(form.get("method", ""))
            target = str(form.get("target", ""))
            args = _values(form, "arg:")
            if method == "resources/read":
                params: dict[str, Any] = {"uri": target}
            elif method in ("tools/call", "prompts/get"):
                params = {"name": target, "arguments": args}
            else:
                raise FormError(f"the playground does not send {method!r}")
        except FormError as exc:
            return _fragment(f"<p class=failure>{exc}</p>")
        run = self.playground.start(route, str(form.get("revision", "")), method, params)
        if isinstance(run, str):
            return _fragment(f"<p class=failure>{run}</p>")
        await self._settle(run)
        return _fragment(html.run_fragment(run, self.upstream_of(run)))

    async def show(self, request: web.Request) -> web.Response:
        run = self.playground.runs.get(request.match_info["id"])
        if run is None:
            raise web.HTTPNotFound()
        return _fragment(html.run_fragment(run, self.upstream_of(run)))

    async def answer(self, request: web.Request) -> web.Response:
        run = self.playground.runs.get(request.match_info["id"])
        if run is None or not run.questions:
            return _fragment("<p class=failure>that call is not waiting for an answer</p>")
        form = await request.post()
        try:
            answers = {key: _answer(form, key, ask.kind) for key, ask in run.questions.items()}
        except FormError as exc:
            return _fragment(f"<p class=failure>{exc}</p>")
        run.answer(answers)
        await self._settle(run)
        return _fragment(html.run_fragment(run, self.upstream_of(run)))

    @staticmethod
    async def _settle(run: Run, within: float = 5.0) -> None:
        """Wait a little for the call to finish or be asked something (the page polls
        after that)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            run.changed.clear()
            if run.done or run.questions:
                return
            try:
                await asyncio.wait_for(run.changed.wait(), deadline - loop.time())
            except TimeoutError:
                return


def _fragment(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html")


def _why(run: Run) -> str:
    if run.error is not None:
        return run.error
    message = getattr(run.outcome, "message", None)
    return str(message) if message is not None else "no answer"


def _values(form: MultiDictProxy[Any], prefix: str) -> dict[str, Any]:
    """Form fields named ``prefix + name``, typed by their ``type:`` companions."""
    values: dict[str, Any] = {}
    for key in form:
        if not key.startswith("type:" + prefix):
            continue
        name = key[len("type:" + prefix) :]
        kind = str(form.get(key))
        raw = form.get(prefix + name)
        if kind == "boolean":
            values[name] = raw == "true"
        elif raw is None or raw == "":
            continue
        else:
            values[name] = _typed(name, kind, str(raw))
    return values


def _typed(name: str, kind: str, raw: str) -> Any:
    try:
        if kind == "integer":
            return int(raw)
        if kind == "number":
            return float(raw)
        if kind == "json":
            return orjson.loads(raw)
    except ValueError:
        raise FormError(f"{name}: not a valid {kind}") from None
    return raw


def _answer(form: MultiDictProxy[Any], key: str, kind: AskKind) -> Answer:
    action = str(form.get(f"action:{key}", "accept"))
    if kind is AskKind.ELICIT:
        if action != "accept":
            return Answer(result={"action": "decline" if action == "decline" else "cancel"})
        return Answer(result={"action": "accept", "content": _values(form, f"ans:{key}:")})
    if kind is AskKind.SAMPLE:
        text = str(form.get(f"sample:{key}", ""))
        return Answer(
            result={
                "role": "assistant",
                "content": {"type": "text", "text": text},
                "model": "console-operator",
                "stopReason": "endTurn",
            }
        )
    return Answer(result={"roots": []})
