"""The pass-through lane for a 2026-07-28 client before a handshake-era upstream (issue
50): once the full path has opened the client's pool, a call goes on it at once; a
plain result is read by the upstream's adapter and encoded by the client's, and
whatever else the upstream answers first -- a question above all -- is held for the
full path, which parks the call as it would have.

Two gateways, the lane on and off, each before a fake upstream of its own with the
same behaviour (tests/e2e/fake_upstreams.py): every answer the client hears is the
same through both, each call reaches its upstream as often, the lane is seen in
the metrics; a client that declares roots (its pool is named by them) and one that
asks for a log level the pool is not at yet take the full path."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.e2e.fake_client import INFO, WAIT, Reply, modern_headers, post, text_of
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import RunningGateway, gateway
from tests.e2e.sdk_peers import modern_call
from tests.e2e.test_pass_through import _passed, _same
from tests.e2e.test_unsolicited_question import OffCallAsker, serving

ELICIT: dict[str, Any] = {"elicitation": {"form": {}}}
ADA = {"action": "accept", "content": {"name": "Ada"}}
BLUE = {"action": "accept", "content": {"colour": "blue"}}
ADA_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}
# What the gateways log when a call's answer was cut after the tool ran.
CUT = ("upstream call failed", "connection", "may have run")


def _body(
    name: str,
    id_: int,
    *,
    caps: dict[str, Any] | None = None,
    responses: dict[str, Any] | None = None,
    state: str | None = None,
    level: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {INFO: {"name": "e2e-lane", "version": "0"}}
    if level is not None:
        meta["io.modelcontextprotocol/logLevel"] = level
    arguments = {"text": f"t{id_}"}
    given = ELICIT if caps is None else caps
    return modern_call(name, arguments, given, responses=responses, state=state, id_=id_, meta=meta)


async def _call(
    http: aiohttp.ClientSession, gw: RunningGateway, name: str, id_: int, **kw: Any
) -> Reply:
    body = _body(name, id_, **kw)
    return await post(http, gw.url("/mcp"), body, modern_headers("tools/call", name))


async def _passes(http: aiohttp.ClientSession, gw: RunningGateway) -> float:
    async with http.get(gw.url("/metrics")) as response:
        return _passed(await response.text())


@contextlib.asynccontextmanager
async def _pair(
    behaviour: str, tmp_path: Path, flags: str = ""
) -> AsyncIterator[tuple[list[FakeUpstream], list[RunningGateway]]]:
    """A fake upstream for each gateway; the lane on in the first, off in the second.
    The fakes run in this loop: they stop before the gateways do (a gateway ending
    its upstream sessions would otherwise wait on a loop blocked in its teardown)."""
    fakes = [FakeUpstream(behaviour), FakeUpstream(behaviour)]
    with contextlib.ExitStack() as stack:
        try:
            for fake in fakes:
                await fake.start()
            gws = [
                stack.enter_context(
                    gateway(
                        f"/mcp={fake.url}{flags}",
                        extra=extra,
                        tmp_path=tmp_path,
                        expected_errors=CUT,
                    )
                )
                for fake, extra in zip(fakes, ((), ("--no-pass-through",)), strict=True)
            ]
            yield fakes, gws
        finally:
            for fake in fakes:
                await fake.stop()


def _round(reply: Reply) -> tuple[dict[str, Any], str]:
    """An input_required result's questions and its requestState."""
    assert reply.status == 200, reply.text
    result = reply.result
    assert result.get("resultType") == "input_required", result
    return result["inputRequests"], result["requestState"]


async def _asked_through(
    http: aiohttp.ClientSession, gw: RunningGateway, name: str, answers: list[dict[str, Any]]
) -> list[Any]:
    """A tool that asks, answered round by round: what the client heard each time (the
    questions, then the result), without the state each gateway seals its own way."""
    heard: list[Any] = []
    reply = await _call(http, gw, name, 10)
    for answer in answers:
        asks, state = _round(reply)
        heard.append(sorted(ask["method"] for ask in asks.values()))
        heard.append(sorted(str(ask["params"]) for ask in asks.values()))
        responses = {key: answer for key in asks}
        reply = await _call(http, gw, name, 10, responses=responses, state=state)
    heard.append((reply.status, reply.result.get("resultType"), text_of(reply.result)))
    return heard


async def test_plain_results_and_questions_are_answered_as_the_full_path_answers_them(
    tmp_path: Path,
) -> None:
    async with _pair("ask", tmp_path) as (fakes, gws), aiohttp.ClientSession() as http:
        for gw in gws:
            await _call(http, gw, "echo", 1)  # the full path opens the pool
        for id_ in (2, 3):
            heard = [_same(await _call(http, gw, "echo", id_)) for gw in gws]
            assert heard[0] == heard[1]
        assert (await _call(http, gws[0], "echo", 4)).result["content"][0]["text"] == "echo: t4"
        for name, answers in (("ask_name", [ADA]), ("ask_twice", [ADA, BLUE])):
            heard = [await _asked_through(http, gw, name, answers) for gw in gws]
            assert heard[0] == heard[1], name
            assert "Ada" in heard[0][-1][2], heard[0]
        # Plain results only (echo 2-4): a call that asked was read on by the full path.
        assert await _passes(http, gws[0]) == 3
        assert await _passes(http, gws[1]) == 0
    assert fakes[0].calls == fakes[1].calls + 1  # the one more echo, each call once
    assert len(fakes[0].asked) == len(fakes[1].asked) == 3


async def test_a_call_cut_after_it_ran_is_told_as_the_full_path_tells_it(tmp_path: Path) -> None:
    """The lane sent it, its answer was cut: "may have run", and sent again only where
    the tool says that is safe (read_it), as on the full path."""
    async with _pair("flaky", tmp_path) as (fakes, gws), aiohttp.ClientSession() as http:
        for gw in gws:
            listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            listing["params"]["_meta"] = _body("echo", 1)["params"]["_meta"]
            await post(http, gw.url("/mcp"), listing, modern_headers("tools/list"))
        for name in ("plain", "read_it", "same_again"):
            heard = [_same(await _call(http, gw, name, 7)) for gw in gws]
            assert heard[0] == heard[1], name
        assert fakes[0].runs == fakes[1].runs
        assert fakes[0].runs["read_it"] == 2  # cut, then sent again: safe
        assert fakes[0].runs["plain"] == 1  # cut: may have run, not sent again


async def test_a_client_that_declares_roots_takes_the_full_path(tmp_path: Path) -> None:
    """Its pool is named by the roots it gives (upstream/roots.py): the full path's."""
    async with _pair("ask", tmp_path) as (_fakes, gws), aiohttp.ClientSession() as http:
        rooted = {**ELICIT, "roots": {}}
        for id_ in (1, 2, 3):
            reply = await _call(http, gws[0], "echo", id_, caps=rooted)
            assert reply.result["content"][0]["text"] == f"echo: t{id_}"
        assert await _passes(http, gws[0]) == 0


async def test_a_log_level_the_pool_is_not_at_is_set_before_the_call(tmp_path: Path) -> None:
    """The full path raises the pool's level first; a call the pool's level already
    serves takes the lane.  Both gateways set the same levels, in the same order."""
    async with _pair("logs", tmp_path) as (fakes, gws), aiohttp.ClientSession() as http:
        levels = ("warning", "warning", "info", "info", "error")
        for gw in gws:
            for id_, level in enumerate(levels, start=1):
                reply = await _call(http, gw, "echo", id_, level=level)
                assert reply.result["content"][0]["text"] == f"echo: t{id_}"
        assert await _passes(http, gws[0]) == 3  # the second warning, info and error
        assert await _passes(http, gws[1]) == 0
    assert fakes[0].levels == fakes[1].levels == ["warning", "info"]


class GetStreamAsker(OffCallAsker):
    """A 2025-06-18 server whose `ask_off` asks its question on the session's GET stream
    (as a TypeScript SDK 1.x server's ``elicitInput`` without a related request does),
    then answers the call with what it was told; `echo` answers at once.  ``seen``: the
    methods it read (``cancelled`` among them if the gateway gave up on a call)."""

    def __init__(self) -> None:
        super().__init__()  # its GET stream (``_stream``), ``seen``
        self.answers: dict[str, asyncio.Future[dict[str, Any]]] = {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET":
            return await self._stream(request)
        if request.method == "DELETE":
            return web.Response(status=200)
        message = json.loads(await request.read())
        method, id_ = message.get("method"), message.get("id")
        self.seen.append(str(method))
        if method is None:  # an answer to our question
            future = self.answers.get(str(id_))
            if future is not None and not future.done():
                future.set_result(message.get("result") or {})
            return web.Response(status=202)
        if method == "initialize":
            result = {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "get-stream-asker", "version": "0"},
            }
            headers = {"Mcp-Session-Id": uuid.uuid4().hex}
            return web.json_response(_rpc(id_, result), headers=headers)
        if "Mcp-Session-Id" not in request.headers:  # server/discover, say: no session
            return web.json_response({"error": "no session"}, status=400)
        if id_ is None:
            return web.Response(status=202)
        if method == "tools/call":
            return web.json_response(_rpc(id_, await self._tool(request, message)))
        tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("echo", "ask_off")]
        return web.json_response(_rpc(id_, {"tools": tools} if method == "tools/list" else {}))

    async def _tool(self, request: web.Request, message: dict[str, Any]) -> dict[str, Any]:
        text = "echo"
        if message["params"]["name"] == "ask_off":
            ask_id = f"ask-{len(self.answers)}"
            self.answers[ask_id] = asyncio.get_running_loop().create_future()
            question = {"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create"}
            question["params"] = {"message": "Who?", "requestedSchema": ADA_SCHEMA}
            await self.streams[request.headers["Mcp-Session-Id"]].put(question)
            async with asyncio.timeout(WAIT):
                answer = await self.answers[ask_id]
            text = f"hello {answer.get('content', {}).get('name')}"
        return {"content": [{"type": "text", "text": text}]}


def _rpc(id_: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


async def test_a_question_asked_on_the_get_stream_while_the_lane_waits_is_the_calls(
    tmp_path: Path,
) -> None:
    """The lane sends from the parked call's task: a question the server asks on its GET
    stream meanwhile reaches this call's client as input_required (never held for the
    pool's next call while this one waits out its timeout), and its answer completes
    the call; through both gateways alike, nothing cancelled."""
    servers = [GetStreamAsker(), GetStreamAsker()]
    async with contextlib.AsyncExitStack() as stack:
        urls = [(await stack.enter_async_context(serving(s)))[0] for s in servers]
        with contextlib.ExitStack() as gateways:
            gws = [
                gateways.enter_context(
                    gateway(f"/mcp={url},timeout=20", extra=extra, tmp_path=tmp_path)
                )
                for url, extra in zip(urls, ((), ("--no-pass-through",)), strict=True)
            ]
            try:
                async with aiohttp.ClientSession() as http:
                    heard = []
                    for gw, server in zip(gws, servers, strict=True):
                        await _call(http, gw, "echo", 1)  # the full path opens the pool
                        await _call(http, gw, "echo", 2)  # the lane's (with it on)
                        async with asyncio.timeout(WAIT):
                            await server.stream_open.wait()
                        async with asyncio.timeout(5):  # well within the route's timeout
                            heard.append(await _asked_through(http, gw, "ask_off", [ADA]))
                    # The second echo; ask_off's result came to its retry (the full path's).
                    assert await _passes(http, gws[0]) == 1
            finally:
                await stack.aclose()  # the servers first: the gateways' DELETEs are refused
    assert heard[0] == heard[1]
    assert heard[0][-1] == (200, "complete", "hello Ada"), heard[0]
    assert [s.seen.count("notifications/cancelled") for s in servers] == [0, 0]
