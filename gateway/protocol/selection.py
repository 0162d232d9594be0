"""AdapterSet: the revisions a gateway speaks, and which one an inbound message speaks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gateway.core import Failure, FailureKind, Preamble
from gateway.protocol.adapter import Adapter, adapter_of
from gateway.protocol.adapter.server import Decoded
from gateway.protocol.v2024_11_05 import Adapter2024_11_05
from gateway.protocol.v2025_03_26 import Adapter2025_03_26
from gateway.protocol.v2025_06_18 import Adapter2025_06_18
from gateway.protocol.v2025_11_25 import Adapter2025_11_25
from gateway.protocol.v2026_07_28 import Adapter2026_07_28

# Adding a revision: one file, one entry here.
DEFAULT_ADAPTERS: tuple[type[Adapter], ...] = (
    Adapter2026_07_28,
    Adapter2025_11_25,
    Adapter2025_06_18,
    Adapter2025_03_26,
    Adapter2024_11_05,
)


@dataclass(slots=True)
class Inbound:
    """A message in its client's revision: the adapter that speaks for the client and
    what the message decoded to; or ``refused``, the revision's own transport rules
    (its HTTP headers) turning the whole message away, in that adapter's words."""

    adapter: Adapter
    items: list[Decoded] = field(default_factory=list)
    refused: Failure | None = None


class AdapterSet:
    """An immutable set of adapters, newest first."""

    def __init__(self, adapters: Iterable[Adapter]) -> None:
        self.adapters: tuple[Adapter, ...] = tuple(
            sorted(adapters, key=lambda a: a.version, reverse=True)
        )
        if not self.adapters:
            raise ValueError("an AdapterSet needs at least one adapter")
        self.by_version: dict[str, Adapter] = {a.version: a for a in self.adapters}
        # Every revision known to recognise its own messages, spoken here or not: a
        # message of a revision left out is refused as unsupported, not misread.
        self._known: tuple[type[Adapter], ...] = tuple(
            dict.fromkeys([*(type(a) for a in self.adapters), *DEFAULT_ADAPTERS])
        )

    @classmethod
    def default(cls) -> AdapterSet:
        return cls(adapter() for adapter in DEFAULT_ADAPTERS)

    def with_adapter(self, adapter: Adapter) -> AdapterSet:
        """This set plus one more revision (replacing any with the same version)."""
        kept = [a for a in self.adapters if a.version != adapter.version]
        return AdapterSet([*kept, adapter])

    def only(self, versions: Iterable[str]) -> AdapterSet:
        wanted = set(versions)
        unknown = wanted - set(self.by_version)
        if unknown:
            raise ValueError(f"unknown protocol revision(s): {', '.join(sorted(unknown))}")
        return AdapterSet(a for a in self.adapters if a.version in wanted)

    @property
    def versions(self) -> list[str]:
        return [a.version for a in self.adapters]

    @property
    def stateless(self) -> list[Adapter]:
        return [a for a in self.adapters if not a.has_handshake]

    @property
    def handshake(self) -> list[Adapter]:
        return [a for a in self.adapters if a.has_handshake]

    def names_stateless(self, version: str | None) -> bool:
        """An ``MCP-Protocol-Version`` header names a stateless revision of this set
        (which has no sessions: a GET stream or DELETE is not its to ask)."""
        adapter = self.by_version.get(version) if version is not None else None
        return adapter is not None and not adapter.has_handshake

    def names_handshake(self, version: str | None) -> bool:
        """``version`` names a handshake-era revision of this set."""
        adapter = self.by_version.get(version) if version is not None else None
        return adapter is not None and adapter.has_handshake

    @property
    def default_legacy(self) -> Adapter:
        """For a request that names no revision: the newest that needs no version header."""
        quiet = [a for a in self.handshake if not a.version_header and "http" in a.transports]
        return (quiet or self.handshake or list(self.adapters))[0]

    def for_initialize(self, requested: Any) -> Adapter:
        """Legacy negotiation: the client's revision if we speak it, else our newest."""
        adapter = self.by_version.get(requested) if isinstance(requested, str) else None
        if adapter is not None and adapter.has_handshake:
            return adapter
        return self.handshake[0] if self.handshake else self.adapters[0]

    def unsupported(self, requested: str, *, stateless: bool) -> Failure:
        supported = [a.version for a in (self.stateless if stateless else self.adapters)]
        return Failure(
            FailureKind.UNSUPPORTED_VERSION,
            f"Unsupported protocol version: {requested}",
            {"supported": supported or self.versions, "requested": requested},
        )

    def named_version(self, message: dict[str, Any]) -> str | None:
        """The revision a message names for itself (per request), if any."""
        for known in self._known:
            named = known.named_version(message)
            if named is not None:
                return named
        return None

    def select(self, preamble: Preamble) -> Adapter | Failure:
        """The adapter for an inbound message: the revision it names itself (as the
        adapters recognise it), header, initialize, session, in that order, else the
        legacy default."""
        body = preamble.body
        first = body[0] if isinstance(body, list) and body else body
        message: dict[str, Any] = first if isinstance(first, dict) else {}
        raw_params = message.get("params")
        params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
        per_request = preamble.named_version = self.named_version(message)
        header = preamble.headers.get("mcp-protocol-version")
        if per_request is not None:
            adapter = self.by_version.get(per_request)
            if adapter is None or adapter.has_handshake:
                # A header naming a stateless revision spoken here, with a body naming
                # another: a header/body mismatch, which that revision's checks report.
                named = self.by_version.get(header) if header is not None else None
                if named is not None and not named.has_handshake:
                    return named
                return self.unsupported(per_request, stateless=True)
            return adapter
        if header is not None:
            adapter = self.by_version.get(header)
            if adapter is None:
                return self.unsupported(header, stateless=preamble.session is None)
            if not adapter.has_handshake:
                return adapter
        if message.get("method") == "initialize":
            return self.for_initialize(params.get("protocolVersion"))
        if preamble.session is not None:
            return self.by_version.get(preamble.session.protocol_version, self.default_legacy)
        if header is not None:
            return self.by_version[header]
        return self.default_legacy

    def decode(self, preamble: Preamble) -> Inbound | Failure:
        """A parsed message in one step: its revision (:meth:`select`), that revision's
        HTTP header rules, then its decode.  A session's client stays on the revision
        it negotiated, whatever a later message's header says (not an initialize).
        A Failure: no revision spoken here fits (worded by the transport's reporter)."""
        selected = self.select(preamble)
        if isinstance(selected, Failure):
            return selected
        refused = selected.check_http(preamble) if preamble.transport != "stdio" else None
        if refused is not None:
            return Inbound(selected, refused=refused)
        adapter, session, body = selected, preamble.session, preamble.body
        if (
            session is not None
            and selected.has_handshake
            and session.protocol_version != selected.version
            and not (isinstance(body, dict) and body.get("method") == "initialize")
        ):
            adapter = adapter_of(session) or selected
        return Inbound(adapter, adapter.decode(preamble))
