"""Discovery documents: protected-resource metadata (RFC 9728) and authorization-server
metadata (RFC 8414, OpenID Connect Discovery), their well-known URLs and rewriting.

Pure functions over plain JSON objects; fetching lives in ``discovery``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

PRM = "/.well-known/oauth-protected-resource"
ASM = "/.well-known/oauth-authorization-server"
OIDC = "/.well-known/openid-configuration"
WELL_KNOWN = (PRM, ASM, OIDC)

Document = dict[str, Any]


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def _path_of(url: str) -> str:
    return urlsplit(url).path.rstrip("/")


def insert_well_known(url: str, well_known: str) -> str:
    """RFC 8414 §3.1 / RFC 9728 §3.1: the well-known segment goes between the
    origin and the path (`https://h/a/b` → `https://h/.well-known/x/a/b`)."""
    return origin_of(url) + well_known + _path_of(url)


def metadata_url(resource: str) -> str:
    """Where the protected-resource metadata of ``resource`` lives."""
    return insert_well_known(resource, PRM)


def prm_candidates(upstream: str, hint: str | None = None) -> list[str]:
    """Where an upstream's protected-resource metadata may be: the URL its challenge
    named, then the path-suffixed and the root well-known URLs."""
    urls = [hint] if hint else []
    urls += [metadata_url(upstream), origin_of(upstream) + PRM]
    return list(dict.fromkeys(urls))


def as_candidates(issuer: str) -> list[str]:
    """Where an authorization server's metadata may be, in the order MCP clients try
    (RFC 8414 path insertion, then OpenID Connect's two forms)."""
    path = _path_of(issuer)
    base = origin_of(issuer)
    if not path:
        return [base + ASM, base + OIDC]
    return [base + ASM + path, base + OIDC + path, base + path + OIDC]


def is_protected_resource(doc: Any) -> bool:
    servers = doc.get("authorization_servers") if isinstance(doc, dict) else None
    return (
        isinstance(servers, list)
        and bool(servers)
        and all(isinstance(s, str) and s.startswith(("http://", "https://")) for s in servers)
    )


def is_authorization_server(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("issuer"), str)
        and isinstance(doc.get("token_endpoint"), str)
    )


def rewrite_protected_resource(doc: Document, resource: str) -> Document:
    """The upstream's document as the gateway serves it: the gateway is the resource
    the client talks to, so `resource` is its public URL; the authorization servers,
    scopes and everything else stay the upstream's."""
    return {**doc, "resource": resource}


def protected_resource(
    resource: str, authorization_servers: list[str], scopes: list[str] | None = None
) -> Document:
    """A protected-resource document of the gateway's own (a legacy upstream that
    publishes none, or the gateway validating tokens itself)."""
    doc: Document = {
        "resource": resource,
        "authorization_servers": authorization_servers,
        "bearer_methods_supported": ["header"],
    }
    if scopes:
        doc["scopes_supported"] = scopes
    return doc


def default_authorization_server(origin: str) -> Document:
    """The first OAuth revision's fallback: a server without metadata authorizes at its own
    origin's `/authorize`, `/token` and `/register`."""
    return {
        "issuer": origin,
        "authorization_endpoint": origin + "/authorize",
        "token_endpoint": origin + "/token",
        "registration_endpoint": origin + "/register",
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
    }
