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

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from tests.e2e.fake_client import INFO, Reply, modern_headers, post, text_of
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import RunningGateway, gateway
from tests.e2e.sdk_peers import modern_call
from tests.e2e.test_pass_through import _passed, _same

ELICIT: dict[str, Any] = {"elicitation": {"form": {}}}
ADA = {"action": "accept", "content": {"name": "Ada"}}
BLUE = {"action": "accept", "content": {"colour": "blue"}}
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
