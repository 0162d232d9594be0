"""A 2025-11-25 upstream's "URL elicitation required" (-32042) for a stateless
client: an input_required with the URL elicitation, and the retry calls the
upstream again (the out-of-band step is done by then)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from tests.e2e.fake_client import modern_headers, modern_meta, post, text_of
from tests.e2e.fake_upstreams import FakeUpstream
from tests.e2e.gateway_proc import gateway

CAPS = "io.modelcontextprotocol/clientCapabilities"


def _body(id_: int, capabilities: dict[str, Any], **extra: Any) -> dict[str, Any]:
    meta = {**modern_meta(), CAPS: capabilities}
    params = {"name": "echo", "arguments": {"text": "x"}, "_meta": meta, **extra}
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}


async def test_url_elicitation_required_becomes_input_required(tmp_path: Path) -> None:
    upstream = FakeUpstream("urlreq")
    url = await upstream.start()
    try:
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            target = gw.url("/mcp")
            headers = modern_headers("tools/call", "echo")
            async with aiohttp.ClientSession() as http:
                caps = {"elicitation": {"url": {}}}
                first = await post(http, target, _body(1, caps), headers)
                result = first.result
                assert result["resultType"] == "input_required", first.text
                (ask,) = result["inputRequests"].values()
                assert ask["method"] == "elicitation/create"
                assert ask["params"]["mode"] == "url"
                assert ask["params"]["url"] == "https://auth.example/consent"
                assert "elicitationId" not in ask["params"]  # no 2026 form
                responses = {key: {"action": "accept"} for key in result["inputRequests"]}
                retry = _body(
                    2, caps, inputResponses=responses, requestState=result["requestState"]
                )
                second = await post(http, target, retry, headers)
                assert text_of(second.result) == "authorized", second.text
            await upstream.stop()
    finally:
        await upstream.stop()


async def test_a_client_without_url_elicitation_is_told_what_it_lacks(tmp_path: Path) -> None:
    upstream = FakeUpstream("urlreq")
    url = await upstream.start()
    try:
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            async with aiohttp.ClientSession() as http:
                reply = await post(
                    http,
                    gw.url("/mcp"),
                    _body(1, {"elicitation": {"form": {}}}),
                    modern_headers("tools/call", "echo"),
                )
                assert reply.status == 400, reply.text
                assert reply.error["code"] == -32021
                assert reply.error["data"]["requiredCapabilities"] == {"elicitation": {"url": {}}}
            await upstream.stop()
    finally:
        await upstream.stop()
