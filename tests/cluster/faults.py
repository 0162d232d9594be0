"""The load a failover is tried under, and what its clients were told.

Two gateway replicas, A and B, on one store.  Each round of ``greet_me`` starts at A
(parked there) and is answered at B (relayed to its owner, A); a session opened at A
is used through B.  Every request must be answered by a success or a 503 that says to
send the same request again (which the load then does); anything else — a 500, a
session declared not found, a parked call declared gone, a finished round refused
as spent — is what a client must never be told, and is kept to be shown.  After the
fault, every round that finished must have left its spent marker in the store.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tests.cluster.client import LegacyClient, greet, post_json
from tests.e2e.fake_client import modern_headers, request

SEND_AGAIN = "send the same request again"
# How long one request may be sent again before the load gives up on it.
RESEND_FOR = 30.0
GREET = modern_headers("tools/call", "greet_me")


def marker_of(state: str) -> str:
    """The store key a spent requestState leaves (see gateway/bridge/state.py)."""
    return "gw:used:" + hashlib.sha256(state.encode()).hexdigest()


@dataclass
class Told:
    """What the load's clients were told, and the rounds that finished."""

    answers: Counter[str] = field(default_factory=Counter)
    wrong: list[Any] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)  # their requestStates
    sessions_used: int = 0
    first_503: float | None = None
    last_503: float | None = None

    def window(self) -> float:
        """Seconds from the first 503 to the last (0: none)."""
        if self.first_503 is None or self.last_503 is None:
            return 0.0
        return self.last_503 - self.first_503

    def figures(self) -> str:
        return (
            f"rounds finished {len(self.finished)}, session calls {self.sessions_used}, "
            f"answers {dict(self.answers)}, 503 window {self.window():.1f} s, "
            f"wrong {len(self.wrong)}"
        )


class Load:
    def __init__(self, http: aiohttp.ClientSession, a: str, b: str) -> None:
        self.http, self.a, self.b = http, a, b
        self.told = Told()
        self._ids = iter(range(10, 10**9))
        self.session: LegacyClient | None = None

    async def open_session(self) -> None:
        self.session = LegacyClient(self.http, self.a)
        await self.session.open()

    async def _send(self, url: str, body: Any, headers: dict[str, str]) -> Any | None:
        """``body`` sent until it is answered with no 503 (bounded): its result, or
        None when it was answered with anything else (kept in ``wrong``)."""
        deadline = time.monotonic() + RESEND_FOR
        while True:
            try:
                status, reply, _ = await post_json(self.http, url, body, headers)
            except (TimeoutError, aiohttp.ClientError) as exc:
                self.told.wrong.append(("no answer", repr(exc)))
                return None
            self.told.answers[str(status)] += 1
            if status == 503 and SEND_AGAIN in str(reply):
                now = time.monotonic()
                self.told.first_503 = self.told.first_503 or now
                self.told.last_503 = now
                if now > deadline:
                    self.told.wrong.append(("503 for too long", reply))
                    return None
                await asyncio.sleep(0.1)  # the client's own pace, not a synchronisation
                continue
            ok = status == 200 and isinstance(reply, dict) and "result" in reply
            if ok and not reply["result"].get("isError"):
                return reply["result"]
            self.told.wrong.append((status, reply))
            return None

    async def round(self) -> None:
        first = await self._send(self.a, greet(next(self._ids)), GREET)
        if first is None:
            return
        (key, state) = (*first["inputRequests"], first["requestState"])
        answer = greet(
            next(self._ids), state, {key: {"action": "accept", "content": {"name": "Ada"}}}
        )
        done = await self._send(self.b, answer, GREET)
        if done is None:
            return
        if done.get("content", [{}])[0].get("text") != "Hello, Ada!":
            self.told.wrong.append(("not finished", done))
            return
        self.told.finished.append(state)

    async def session_call(self) -> None:
        assert self.session is not None
        text = f"echo {next(self._ids)}"
        message = request(
            next(self._ids), "tools/call", {"name": "echo", "arguments": {"text": text}}
        )
        result = await self._send(self.b, message, self.session.headers())
        if result is not None:
            self.told.sessions_used += 1
            if result["content"][0]["text"] != text:
                self.told.wrong.append(("echoed wrong", result))

    async def run(self, until: Callable[[], bool]) -> None:
        """Rounds and session calls, a few at once, until ``until()``."""
        while not until():
            await asyncio.gather(self.round(), self.round(), self.session_call())
