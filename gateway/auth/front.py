"""One route's face towards OAuth clients: its resource URL, who may call it, and how
an upstream's refusal is passed on.

Two modes:

- ``transparent`` (default): the upstream is the resource server.  The gateway
  passes its 401/403 on (the challenge pointing at the gateway's own metadata),
  serves the upstream's documents under its own URL, and forwards the client's
  token.  Once the upstream is known to want credentials, a request without any
  is answered 401 at once, as the upstream would.
- ``gateway``: the gateway is the resource server.  It checks the token itself
  and calls the upstream with the route's own credentials, never the client's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

import structlog

from gateway.auth import challenge
from gateway.auth.discovery import UpstreamAuth
from gateway.auth.metadata import (
    Document,
    metadata_url,
    protected_resource,
    rewrite_protected_resource,
)
from gateway.auth.public_url import resource_url
from gateway.auth.tokens import Rejected, TokenValidator, Unavailable
from gateway.core import Failure, FailureKind

log = structlog.get_logger(__name__)

Mode = Literal["transparent", "gateway"]
WWW_AUTHENTICATE = "WWW-Authenticate"
_REFUSALS = (FailureKind.UNAUTHORIZED, FailureKind.FORBIDDEN)


class RequestView(Protocol):
    """What the auth side reads of a request (an aiohttp request is one, and so is
    a :class:`RequestSeen`)."""

    @property
    def headers(self) -> Mapping[str, str]:
        """Case-insensitive names, or lower-case ones (what is looked up here is)."""
        ...

    @property
    def scheme(self) -> str: ...

    @property
    def host(self) -> str: ...


@dataclass(frozen=True, slots=True)
class RequestSeen:
    """What a transport read of a request for the auth side, handed over as data:
    ``headers`` by lower-case name, the scheme and the Host it came in by."""

    headers: Mapping[str, str]
    scheme: str
    host: str


@dataclass
class Admission:
    """The outcome of checking a request's credentials: a principal to bind state to
    (None: the default digest of the credentials), or a refusal to answer with."""

    principal: str | None = None
    failure: Failure | None = None


class RouteAuth:
    """The OAuth side of one route."""

    def __init__(
        self,
        path: str,
        *,
        mode: Mode = "transparent",
        public_url: str | None = None,
        trust_forwarded: bool = False,
        upstream: UpstreamAuth | None = None,
        validator: TokenValidator | None = None,
    ) -> None:
        if mode == "gateway" and validator is None:
            raise ValueError("auth=gateway needs a token validator")
        self.path = path
        self.mode = mode
        self.public_url = public_url
        self.trust_forwarded = trust_forwarded
        self.upstream = upstream
        self.validator = validator

    # ------------------------------------------------------------- the URLs

    def resource(self, request: RequestView) -> str:
        headers = {k.lower(): v for k, v in request.headers.items()}
        return resource_url(
            self.public_url,
            self.path,
            request.scheme,
            request.host,
            headers,
            trust_forwarded=self.trust_forwarded,
        )

    def metadata_url(self, request: RequestView) -> str:
        return metadata_url(self.resource(request))

    async def document(self, request: RequestView) -> Document | None:
        """The protected-resource metadata the gateway serves for this route."""
        resource = self.resource(request)
        if self.validator is not None:
            policy = self.validator.policy
            return protected_resource(resource, [policy.issuer], list(policy.scopes))
        if self.upstream is None:
            return None
        upstream_doc = await self.upstream.protected_resource()
        if upstream_doc is not None:
            return rewrite_protected_resource(upstream_doc, resource)
        servers = await self.upstream.authorization_servers()
        return protected_resource(resource, servers) if servers else None

    # ------------------------------------------------------ inbound requests

    async def admit(self, request: RequestView) -> Admission:
        """Check a request's credentials before anything else is done with it."""
        authorization = request.headers.get("authorization")
        if self.validator is None:
            upstream = self.upstream
            if authorization or upstream is None or not upstream.protected:
                return Admission()
            value = challenge.rewrite(upstream.challenge, self.metadata_url(request))
            failure = Failure(
                FailureKind.UNAUTHORIZED,
                "Unauthorized: the server requires credentials",
                headers={WWW_AUTHENTICATE: value},
            )
            return Admission(failure=failure)
        try:
            principal = await self.validator.validate(authorization)
        except Rejected as rejected:
            return Admission(failure=self._refusal(request, rejected))
        except Unavailable as exc:
            log.warning("token check unavailable", route=self.path, reason=str(exc))
            failure = Failure(FailureKind.UPSTREAM_UNAVAILABLE, "the token cannot be checked now")
            return Admission(failure=failure)
        return Admission(principal=principal.key)

    def _refusal(self, request: RequestView, rejected: Rejected) -> Failure:
        kind = FailureKind.FORBIDDEN if rejected.status == 403 else FailureKind.UNAUTHORIZED
        scope = rejected.scope
        if scope is None and self.validator is not None and self.validator.policy.scopes:
            scope = " ".join(self.validator.policy.scopes)
        value = challenge.bearer(
            self.metadata_url(request),
            error=rejected.error,
            description=rejected.description if rejected.error else None,
            scope=scope,
        )
        return Failure(kind, rejected.description, headers={WWW_AUTHENTICATE: value})

    # ------------------------------------------------- the upstream's refusals

    def passed_on(self, failure: Failure, request: RequestView) -> Failure:
        """An upstream failure as the client gets it: a 401/403 of the upstream keeps
        its challenge, pointed at the gateway's metadata (transparent mode); in
        gateway mode it means the route's own credentials were refused, which the
        client can do nothing about."""
        if failure.kind not in _REFUSALS:
            return failure
        upstream_value = failure.headers.get(WWW_AUTHENTICATE)
        if self.validator is not None:
            log.warning("the upstream refused the route's credentials", route=self.path)
            return Failure(
                FailureKind.UPSTREAM_PROTOCOL,
                "the upstream refused the gateway's own credentials",
            )
        if self.upstream is not None:
            self.upstream.saw_challenge(upstream_value)
        value = challenge.rewrite(upstream_value, self.metadata_url(request))
        return Failure(
            failure.kind, failure.message, failure.data, headers={WWW_AUTHENTICATE: value}
        )
