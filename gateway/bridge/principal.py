"""Who is asking: a keyed digest of the caller's credentials and tenant headers.

A principal binds sessions, pools, parked calls and ``requestState`` to a
caller without keeping its secrets.  It is an HMAC under the gateway's secret,
never a bare hash, so a captured digest cannot be tested against a dictionary
of tokens; and it covers the forwarded headers that select a tenant, so two
tenants that share a token never share anything.  The credential counts in one
normal form (``credential``): one token is one caller, however its scheme is
spelled.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping

ANONYMOUS = "anonymous"
# Headers that say who the caller is, besides the tenant headers a route adds.
CREDENTIAL_HEADERS = ("authorization",)
# Forwarded headers that vary per request and say nothing of who is asking.
PER_REQUEST_HEADERS = frozenset({"traceparent", "tracestate", "baggage"})


def tenant_headers(forwarded: Iterable[str]) -> tuple[str, ...]:
    """Of the headers a route forwards upstream, those that select a tenant: the
    upstream may answer differently for each value, so each value is a principal."""
    return tuple(
        h.lower()
        for h in forwarded
        if h.lower() not in PER_REQUEST_HEADERS and h.lower() not in CREDENTIAL_HEADERS
    )


class Principals:
    """Derives principals for one gateway process (or cluster: same key, same digests)."""

    def __init__(self, key: bytes, tenant_headers: Iterable[str] = ()) -> None:
        self._key = key
        self._headers = tuple(
            dict.fromkeys(h.lower() for h in (*CREDENTIAL_HEADERS, *tenant_headers))
        )

    def of(self, headers: Mapping[str, str]) -> str:
        """The principal of a request with these (lower-case) headers."""
        present = [(name, headers[name]) for name in self._headers if headers.get(name)]
        if not present:
            return ANONYMOUS
        mac = hmac.new(self._key, digestmod=hashlib.sha256)
        for name, value in present:
            if name in CREDENTIAL_HEADERS:
                value = credential(value)
            # Length-prefixed, so no two header sets can run together into one input.
            for part in (name, value):
                data = part.encode("utf-8", "surrogatepass")
                mac.update(len(data).to_bytes(4, "big") + data)
        return "p-" + mac.hexdigest()[:40]


def credential(value: str) -> str:
    """An ``Authorization`` value as one caller has it whatever its spelling: the
    scheme is case-insensitive (RFC 9110 section 11.1, and every SDK's bearer check
    accepts any case) and separated by white space, so ``bearer  t`` and ``BEARER t``
    are ``bearer t``.  The credentials themselves are kept as written."""
    parts = value.split(None, 1)
    if len(parts) < 2:
        return value.strip()
    return f"{parts[0].lower()} {parts[1].strip()}"
