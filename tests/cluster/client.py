"""Raw HTTP clients of the cluster: a 2026-07-28 client and a 2025-11-25 client."""

from __future__ import annotations

import base64
import json
from typing import Any

import aiohttp

from tests.e2e.fake_client import (
    CAPS,
    NEWEST_HANDSHAKE,
    base_headers,
    initialize,
    modern_headers,
    modern_request,
    notification,
    parse_sse,
    request,
)

TIMEOUT = aiohttp.ClientTimeout(total=20)


async def post_json(
    http: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str]
) -> tuple[int, Any, dict[str, str]]:
    """POST; the JSON answer (or the last message of an SSE answer)."""
    async with http.post(url, json=body, headers=headers, timeout=TIMEOUT) as response:
        text = await response.text()
        if response.content_type == "text/event-stream":
            events = parse_sse(text)
            data: Any = events[-1].json() if events else None
        else:
            data = json.loads(text) if text else None
        return response.status, data, dict(response.headers)


def greet(id_: int, state: str | None = None, responses: dict[str, Any] | None = None) -> Any:
    params: dict[str, Any] = {"name": "greet_me", "arguments": {}}
    if state is not None:
        params["requestState"] = state
        params["inputResponses"] = responses or {}
    message = modern_request(id_, "tools/call", params)
    message["params"]["_meta"][CAPS] = {"elicitation": {}}
    return message


async def greet_first(http: aiohttp.ClientSession, url: str, id_: int) -> tuple[str, str]:
    """The first round: input_required; its input key and sealed state."""
    status, body, _ = await post_json(
        http, url, greet(id_), modern_headers("tools/call", "greet_me")
    )
    assert status == 200, body
    result = body["result"]
    assert result["resultType"] == "input_required", body
    (key,) = result["inputRequests"]
    return key, result["requestState"]


async def greet_retry(
    http: aiohttp.ClientSession, url: str, id_: int, key: str, state: str, name: str
) -> tuple[int, Any]:
    answer = {key: {"action": "accept", "content": {"name": name}}}
    status, body, _ = await post_json(
        http, url, greet(id_, state, answer), modern_headers("tools/call", "greet_me")
    )
    return status, body


def owner_of(state: str) -> str:
    """The owner claim of a sealed state (readable, not forgeable)."""
    payload = state[len("gw1.") :].split(".")[0]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims["o"])


class LegacyClient:
    """A 2025-11-25 client with a session."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http = http
        self.url = url
        self.session_id = ""
        self._ids = 1

    def headers(self) -> dict[str, str]:
        return base_headers(
            **{"MCP-Protocol-Version": NEWEST_HANDSHAKE, "Mcp-Session-Id": self.session_id}
        )

    async def open(self) -> None:
        status, body, headers = await post_json(
            self.http, self.url, initialize(1, NEWEST_HANDSHAKE), base_headers()
        )
        assert status == 200, body
        self.session_id = headers["Mcp-Session-Id"]
        async with self.http.post(
            self.url, json=notification("notifications/initialized"), headers=self.headers()
        ) as response:
            assert response.status == 202, await response.text()

    async def call(self, method: str, params: dict[str, Any]) -> tuple[int, Any]:
        self._ids += 1
        status, body, _ = await post_json(
            self.http, self.url, request(self._ids, method, params), self.headers()
        )
        return status, body

    async def echo(self, text: str) -> tuple[int, Any]:
        return await self.call("tools/call", {"name": "echo", "arguments": {"text": text}})
