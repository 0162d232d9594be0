"""The forwarder: runs a normalized Call against a route's upstream.

Revision-free: it branches on what a call is (its Operation) and on the
adapters' behavioural flags, never on a version.  Some operations are the
gateway's own business (the handshake, ping, discovery, log level); the rest
run upstream in the upstream's revision.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from gateway.core import (
    Answer,
    Call,
    Exchange,
    Failure,
    FailureKind,
    InputRequired,
    Operation,
    Outcome,
    ServerProfile,
    Value,
)

# Rounds of input_required a pushed-ask client is walked through before giving up.
MAX_ASK_ROUNDS = 8


class Upstream(Protocol):
    """What the forwarder needs of an upstream link."""

    async def profile(self, principal: str = ..., headers: Any = ...) -> ServerProfile: ...

    async def execute(self, call: Call, exchange: Exchange) -> Outcome: ...

    @property
    def stateless(self) -> bool: ...


class Forwarder:
    """Executes calls for one route."""

    def __init__(
        self, upstream: Upstream, *, client_versions: list[str], stateless_versions: list[str]
    ) -> None:
        self.upstream = upstream
        self.client_versions = client_versions
        self.stateless_versions = stateless_versions

    async def handle(self, call: Call, exchange: Exchange) -> Outcome:
        op = call.operation
        if op is Operation.PING:
            return Value({})  # answered here: a modern upstream has no ping
        if op is Operation.INITIALIZE:
            return Value(self._initialize(call, exchange.profile))
        if op is Operation.DISCOVER:
            return Value(self._discover(exchange.profile))
        if op is Operation.SET_LOG_LEVEL:
            if exchange.session is not None:
                exchange.session.log_level = str(call.params.get("level"))
            return Value({})
        if op in (Operation.INITIALIZED, Operation.PROGRESS, Operation.ROOTS_LIST_CHANGED):
            return Value({})  # consumed by the gateway's own session
        if op is Operation.CANCELLED:
            return Value({})  # cancellation reaches the upstream through the closed call
        subscription = (Operation.RESOURCES_SUBSCRIBE, Operation.RESOURCES_UNSUBSCRIBE)
        if (op in subscription and self.upstream.stateless) or (
            op is Operation.LISTEN and not self.upstream.stateless
        ):
            return Failure(
                FailureKind.UNKNOWN_METHOD,
                f"{call.method} is not bridged to this upstream's protocol era yet",
            )
        return await self._forward(call, exchange)

    async def _forward(self, call: Call, exchange: Exchange) -> Outcome:
        outcome = await self.upstream.execute(call, exchange)
        rounds = 0
        # A client that takes pushed asks gets them one by one, and the upstream
        # hears the answers in a retry (the multi-round pattern, run for the client).
        while isinstance(outcome, InputRequired) and exchange.ask is not None:
            rounds += 1
            if rounds > MAX_ASK_ROUNDS:
                return Failure(
                    FailureKind.UPSTREAM_PROTOCOL,
                    f"the upstream asked for input more than {MAX_ASK_ROUNDS} times",
                )
            answers: dict[str, Answer] = {}
            for key, ask in outcome.asks.items():
                if not ask.allowed_by(call.client.capabilities):
                    return Failure(
                        FailureKind.MISSING_CAPABILITY,
                        f"the server needs {ask.method}, which this client did not declare",
                        {"requiredCapabilities": ask.capability()},
                    )
                answers[key] = await exchange.ask(ask)
            call = replace(call, answers=answers, state=outcome.state)
            outcome = await self.upstream.execute(call, exchange)
        return outcome

    def _initialize(self, call: Call, profile: ServerProfile) -> dict[str, Any]:
        result: dict[str, Any] = {
            "protocolVersion": call.client.protocol_version,
            "capabilities": profile.capabilities,
            "serverInfo": profile.info,
        }
        if profile.instructions:
            result["instructions"] = profile.instructions
        return result

    def _discover(self, profile: ServerProfile) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": list(self.stateless_versions),
            "capabilities": profile.capabilities,
        }
        if profile.instructions:
            result["instructions"] = profile.instructions
        return result
