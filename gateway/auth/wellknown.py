"""The gateway's `/.well-known/` documents for OAuth clients.

- `oauth-protected-resource` (root and path-suffixed, RFC 9728): each route's
  document, with the gateway as the resource.
- `oauth-authorization-server` and `openid-configuration`: what a client that
  looks for the authorization server at the MCP server's own origin (a
  client of the first OAuth revision does) needs: the upstream's own document where it serves
  one, else the document of the authorization server the upstream names.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import orjson
from aiohttp import web

from gateway.auth.front import RouteAuth
from gateway.auth.metadata import ASM, OIDC, PRM, Document
from gateway.auth.public_url import request_origin

JSON = "application/json"
# Public documents, read by browser-based clients from other origins too.
_HEADERS = {"Access-Control-Allow-Origin": "*", "Cache-Control": "max-age=60"}


def _json(document: Document) -> web.Response:
    return web.Response(body=orjson.dumps(document), content_type=JSON, headers=_HEADERS)


def _not_found(what: str) -> web.Response:
    body = {"error": "not_found", "error_description": what}
    return web.Response(body=orjson.dumps(body), status=404, content_type=JSON)


class WellKnown:
    """The handlers, over every route that has an OAuth side."""

    def __init__(self, routes: list[RouteAuth]) -> None:
        self.routes = routes

    def register(self, app: web.Application) -> None:
        for prefix, handler in (
            (PRM, self.protected_resource),
            (ASM, self.authorization_server),
            (OIDC, self.authorization_server),
        ):
            app.router.add_get(prefix, handler)
            app.router.add_get(prefix + "/{suffix:.+}", handler)

    def route_for(self, request: web.Request) -> RouteAuth | None:
        """The route a well-known request is about: named by its path suffix (the
        route's path, its public URL's path, or the trusted proxy prefix + its
        path); the root form means the only route, or the first."""
        suffix = "/" + request.match_info.get("suffix", "").strip("/")
        if suffix == "/":
            return self.routes[0] if self.routes else None
        for route in self.routes:
            if suffix in self._paths(route, request):
                return route
        return None

    def _paths(self, route: RouteAuth, request: web.BaseRequest) -> set[str]:
        paths = {route.path.rstrip("/") or "/"}
        if route.public_url:
            paths.add(urlsplit(route.public_url).path.rstrip("/") or "/")
        headers = {k.lower(): v for k, v in request.headers.items()}
        origin = request_origin(
            request.scheme, request.host, headers, trust_forwarded=route.trust_forwarded
        )
        if origin.prefix:
            paths.add(origin.prefix + route.path.rstrip("/"))
        return paths

    async def protected_resource(self, request: web.Request) -> web.StreamResponse:
        route = self.route_for(request)
        document = await route.document(request) if route is not None else None
        if document is None:
            return _not_found("no protected resource here")
        return _json(document)

    async def authorization_server(self, request: web.Request) -> web.StreamResponse:
        route = self.route_for(request)
        document: Document | None = None
        if route is not None and route.validator is not None:
            fetcher = route.validator.fetcher
            document = await fetcher.authorization_server(route.validator.policy.issuer)
        elif route is not None and route.upstream is not None:
            well_known = OIDC if request.path.startswith(OIDC) else ASM
            document = await route.upstream.authorization_server(well_known)
        if document is None:
            return _not_found("no authorization server metadata here")
        return _json(document)
