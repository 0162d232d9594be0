"""Whether an upstream's HTTP redirect is followed: by default never.

An MCP endpoint has no reason to redirect its POSTs, and following one re-sends
the caller's whole request (arguments, session id, forwarded credentials) to
wherever the upstream points, a cloud metadata address included.  A route may
allow redirects that stay on the upstream's own origin (a server mounted at
``/mcp/`` that redirects ``/mcp``); a redirect anywhere else is refused, always.
"""

from __future__ import annotations

from dataclasses import dataclass

from yarl import URL

from gateway.upstream.carriers.base import CarrierError

# How many same-origin redirects one request may follow.
MAX_HOPS = 5
# A response status that redirects (checked by membership: no call per response).
REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Only these keep the method and body; a 301/302/303 would turn the POST into a GET.
_REPEAT = frozenset({307, 308})


def _origin(url: URL) -> tuple[str | None, str | None, int | None]:
    return url.scheme, url.host, url.port


def redacted(url: URL) -> str:
    """``url`` without what may carry secrets (credentials, query, fragment)."""
    return str(url.with_user(None).with_query(None).with_fragment(None))


@dataclass(frozen=True)
class RedirectPolicy:
    """What a route does with an upstream's 3xx: ``same_origin`` follows 307/308
    within the upstream's origin; everything else is a CarrierError naming the route."""

    route: str = ""
    same_origin: bool = False

    def follow(self, status: int, location: str | None, url: URL, hops: int) -> URL:
        """Where to send the request again, or CarrierError when it must not be."""
        target = self._target(location, url)
        where = "" if target is None else f" to {redacted(target.origin())}"
        if (
            self.same_origin
            and target is not None
            and status in _REPEAT
            and _origin(target) == _origin(url)
            and hops < MAX_HOPS
        ):
            return target
        why = (
            "redirects are not followed (route option redirects=same-origin allows"
            " 307/308 on the upstream's own origin)"
            if not self.same_origin
            else "only 307/308 redirects on the upstream's own origin are followed"
            f" (at most {MAX_HOPS})"
        )
        name = f"route {self.route}" if self.route else "the route"
        # No status: a refused redirect is no answer of the upstream's, and the era
        # probe must not read it as a legacy server's refusal and try other transports.
        raise CarrierError(
            f"the upstream of {name} answered HTTP {status}{where}: {why}", redirected=True
        )

    @staticmethod
    def _target(location: str | None, url: URL) -> URL | None:
        if not location:
            return None
        try:
            return url.join(URL(location))
        except ValueError:
            return None
