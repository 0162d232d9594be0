"""Sealed `requestState`: what a client carries between rounds, unforgeable (signed, not
encrypted: its claims hold nothing secret).

The state names a parked call (or carries an upstream's own state), and is
bound to the route, the principal, the method, a digest of the params and an
expiry.  It is HMAC-SHA256 signed; a token that fails any check is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from gateway.core import Call, Failure, FailureKind, tracing

PREFIX = "gw1."

# Takes a token digest once: True the first time within the TTL (seconds) given,
# cluster-wide when replicas share a store.
UseLedger = Callable[[str, float], Awaitable[bool]]


def params_digest(call: Call) -> str:
    """What the retry must repeat: the method and its params (plumbing excluded)."""
    payload = orjson.dumps([call.method, call.params], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(payload).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class StateSealer:
    """Seals and opens state tokens with one key (configured, or random per process)."""

    def __init__(
        self,
        key: bytes | None = None,
        ttl: float = 600.0,
        *,
        owner: str | None = None,
        ledger: UseLedger | None = None,
    ) -> None:
        self.key = key or secrets.token_bytes(32)
        self.ttl = ttl
        # The replica that seals (a cluster's member id): its parked calls live there.
        self.owner = owner
        self.ledger = ledger

    @staticmethod
    def is_ours(token: str | None) -> bool:
        return isinstance(token, str) and token.startswith(PREFIX)

    def seal(self, call: Call, route: str, principal: str, body: dict[str, Any]) -> str:
        claims = {
            **body,
            "r": route,
            "p": principal,
            "m": call.method,
            "d": params_digest(call),
            "x": round(time.time() + self.ttl, 3),
        }
        if self.owner is not None:
            claims["o"] = self.owner
        if tracing.active is not None:  # OpenTelemetry on: the trace the retry joins
            tracing.active.stamp(claims)
        payload = orjson.dumps(claims, option=orjson.OPT_SORT_KEYS)
        tag = hmac.new(self.key, payload, hashlib.sha256).digest()
        return PREFIX + _b64(payload) + "." + _b64(tag)

    def peek(self, token: str) -> dict[str, Any] | None:
        """The claims of a token this key signed, unchecked otherwise (who owns it)."""
        try:
            if not self.is_ours(token):
                return None
            body, tag = token[len(PREFIX) :].split(".")
            payload = _unb64(body)
            expected = hmac.new(self.key, payload, hashlib.sha256).digest()
            if not hmac.compare_digest(expected, _unb64(tag)):
                return None
            claims = orjson.loads(payload)
        except (ValueError, orjson.JSONDecodeError):
            return None
        return claims if isinstance(claims, dict) else None

    def open(self, token: str, call: Call, route: str, principal: str) -> dict[str, Any]:
        """The claims of a valid token for this call; raises Failure otherwise."""
        claims = self.peek(token)
        if claims is None:
            raise _refused("requestState is not valid (tampered or not issued here)")
        if claims.get("x", 0) < time.time():
            raise _refused("requestState has expired")
        if claims.get("r") != route or claims.get("p") != principal:
            raise _refused("requestState was issued to another caller")
        if claims.get("m") != call.method or claims.get("d") != params_digest(call):
            raise _refused("requestState belongs to a different request (method or params differ)")
        return claims

    async def open_once(self, token: str, call: Call, route: str, principal: str) -> dict[str, Any]:
        """As :meth:`open`, and the token is spent: a second use anywhere is refused."""
        claims = self.open(token, call, route, principal)
        if self.ledger is not None:
            digest = hashlib.sha256(token.encode()).hexdigest()
            lifetime = max(1.0, float(claims.get("x", 0)) - time.time() + 1.0)
            if not await self.ledger(digest, lifetime):
                raise _refused("requestState was already used")
        return claims


def _refused(message: str) -> Failure:
    return Failure(FailureKind.INVALID_PARAMS, message)
