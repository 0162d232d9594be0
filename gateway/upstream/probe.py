"""Which revision and transport an upstream speaks: the era probe.

As the spec's dual-era client rules say: a modern request first (a modern
answer, or a modern server's refusal naming the revisions it speaks, decides
it), then `initialize` over Streamable HTTP, then the HTTP+SSE transport.
A pinned revision skips the guessing.  Anything that is no evidence of a
modern server falls back to the handshake; an unreachable upstream is a
failure, never a verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field

from gateway.core import Failure, FailureKind, ServerProfile
from gateway.protocol import Adapter, AdapterSet
from gateway.upstream.calls import roundtrip
from gateway.upstream.carriers.base import Carrier, CarrierError, carrier_failure, start_carrier
from gateway.upstream.settings import UpstreamSettings


@dataclass
class Verdict:
    """What the probe found: the revision and transport the upstream speaks."""

    adapter: Adapter
    transport: str  # "http", "sse" or "stdio"
    profile: ServerProfile
    # When it was found (wall clock; a replica that adopts it keeps the finder's time).
    found_at: float = field(default_factory=time.time, compare=False)


# Opens a handshake-era session over a transport ("http", "sse" or "stdio"),
# offering the pinned revision if any, and says what it found.  Raises
# CarrierError when the upstream refuses.
Handshake = Callable[[str, Adapter | None], Awaitable[Verdict]]
# The endpoint URL if the upstream opens an HTTP+SSE stream, else None.
SseCheck = Callable[[Mapping[str, str]], Awaitable[str | None]]


class EraProbe:
    """Probes one upstream through ``carrier`` (Streamable HTTP, or the stdio child)."""

    def __init__(
        self,
        settings: UpstreamSettings,
        adapters: AdapterSet,
        carrier: Carrier,
        ids: Iterator[int],
        sse_check: SseCheck,
    ) -> None:
        self.settings = settings
        self.adapters = adapters
        self._carrier = carrier
        self._ids = ids
        self._sse_check = sse_check

    async def run(self, headers: Mapping[str, str], handshake: Handshake) -> Verdict:
        pinned = self.settings.version
        if pinned is not None:
            adapter = self.adapters.by_version.get(pinned)
            if adapter is None:
                raise Failure(FailureKind.INTERNAL, f"unknown pinned revision {pinned}")
            if not adapter.has_handshake:
                if self.settings.transport == "stdio":
                    await start_carrier(self._carrier)  # nothing else starts its child
                return await self._discover(adapter, headers)
            return await self._legacy(headers, handshake, adapter)
        if self.settings.transport != "sse":
            if self.settings.transport == "stdio":
                await start_carrier(self._carrier)
            with _quiet(self._carrier):
                for modern in self.adapters.stateless:
                    verdict = await self._try_modern(modern, headers)
                    if verdict is not None:
                        return verdict
        return await self._legacy(headers, handshake, None)

    @property
    def _modern_transport(self) -> str:
        return "stdio" if self.settings.transport == "stdio" else "http"

    async def _discover(self, adapter: Adapter, headers: Mapping[str, str]) -> Verdict:
        message = adapter.client_opening(next(self._ids), self.settings.client_info, {})
        try:
            response, _ = await roundtrip(
                self._carrier,
                message,
                {**headers, **adapter.client_headers(None, None, message)},
                within=self.settings.request_timeout,
            )
        except CarrierError as exc:
            raise carrier_failure(exc) from exc
        if "result" not in response:
            failure = adapter.client_read_failure(response.get("error"))
            raise Failure(
                FailureKind.UPSTREAM_PROTOCOL, f"server/discover failed: {failure.message}"
            )
        return Verdict(
            adapter, self._modern_transport, adapter.client_read_profile(response["result"])
        )

    async def _try_modern(self, adapter: Adapter, headers: Mapping[str, str]) -> Verdict | None:
        """A modern request first; a recognised modern answer means a modern server."""
        message = adapter.client_opening(next(self._ids), self.settings.client_info, {})
        transport = self._modern_transport
        try:
            # Legacy stdio servers may never answer a method they do not know.
            async with asyncio.timeout(self.settings.probe_timeout):
                response, _ = await roundtrip(
                    self._carrier,
                    message,
                    {**headers, **adapter.client_headers(None, None, message)},
                )
        except TimeoutError:
            if transport == "stdio":
                return None  # no answer in time: legacy, as the stdio fallback rule says
            raise carrier_failure(CarrierError("the probe timed out", timeout=True)) from None
        except CarrierError as exc:
            if exc.status is None or exc.refused_credentials:
                # 401/403: the upstream needs credentials, not another transport.
                raise carrier_failure(exc) from exc
            return None  # a 4xx without a modern error body: a legacy server
        if "result" in response and isinstance(response["result"], dict):
            return Verdict(adapter, transport, adapter.client_read_profile(response["result"]))
        error = response.get("error")
        if not adapter.client_is_modern_refusal(error):
            return None
        for version in adapter.client_offered_versions(error):
            other = self.adapters.by_version.get(version)
            if other is not None and not other.has_handshake and other is not adapter:
                return await self._discover(other, headers)
        return None

    async def _legacy(
        self, headers: Mapping[str, str], handshake: Handshake, pinned: Adapter | None
    ) -> Verdict:
        """A handshake-era verdict: the first session opened is the evidence."""
        transport = self.settings.transport
        if transport == "stdio":
            try:
                verdict = await handshake("stdio", pinned)
            except CarrierError as exc:
                raise carrier_failure(exc) from exc
            if not self.settings.shared:
                await self._carrier.close()  # it only answered the probe
            return verdict
        if transport in ("auto", "http"):
            try:
                return await handshake("http", pinned)
            except CarrierError as exc:
                if (
                    transport == "http"
                    or exc.status is None
                    or exc.status >= 500
                    or exc.refused_credentials
                ):
                    raise carrier_failure(exc) from exc
                # The spec's fallback: POST refused, try the old GET stream.
        try:
            endpoint = await self._sse_check(headers)
        except CarrierError as exc:
            raise carrier_failure(exc) from exc
        if endpoint is None:
            raise Failure(
                FailureKind.UPSTREAM_PROTOCOL,
                "the upstream speaks no MCP transport the gateway recognises "
                "(no modern answer, no initialize over Streamable HTTP, no HTTP+SSE stream)",
            )
        try:
            return await handshake("sse", pinned)
        except CarrierError as exc:
            raise carrier_failure(exc) from exc


@contextlib.contextmanager
def _quiet(carrier: Carrier) -> Iterator[None]:
    """A stdio server's stderr at debug while it is sent a revision it may not know
    (a legacy SDK server logs a long validation error for it: not a failure)."""
    quiet = hasattr(carrier, "quiet_stderr")
    if quiet:
        carrier.quiet_stderr = True  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if quiet:
            carrier.quiet_stderr = False  # type: ignore[attr-defined]
