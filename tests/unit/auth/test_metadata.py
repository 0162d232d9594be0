"""Challenges, public URLs and discovery documents: the pure parts of gateway.auth."""

from __future__ import annotations

import pytest

from gateway.auth import challenge
from gateway.auth.metadata import (
    as_candidates,
    default_authorization_server,
    insert_well_known,
    is_protected_resource,
    metadata_url,
    prm_candidates,
    rewrite_protected_resource,
)
from gateway.auth.public_url import request_origin, resource_url

# ----------------------------------------------------------------- challenges


def test_parse_bearer_with_quoted_and_token_params() -> None:
    value = 'Bearer realm="mcp", error=invalid_token, error_description="bad \\"sig\\""'
    [c] = challenge.parse(value)
    assert c.is_bearer
    assert c.params == {"realm": "mcp", "error": "invalid_token", "error_description": 'bad "sig"'}


def test_parse_several_challenges_and_token68() -> None:
    value = 'Basic abc123==, Bearer resource_metadata="https://u/.well-known/x", scope="a b"'
    basic, bearer = challenge.parse(value)
    assert basic.scheme == "Basic" and basic.token68 == "abc123=="
    assert bearer.params["scope"] == "a b"
    assert challenge.param(value, "resource_metadata") == "https://u/.well-known/x"


def test_rewrite_points_at_the_gateway_and_keeps_the_rest() -> None:
    upstream = (
        'Bearer error="insufficient_scope", scope="files:read", '
        'resource_metadata="http://10.0.0.5:9000/.well-known/oauth-protected-resource/mcp"'
    )
    mine = "https://gw.example/.well-known/oauth-protected-resource/mcp"
    rewritten = challenge.rewrite(upstream, mine)
    [c] = challenge.parse(rewritten)
    assert c.params == {
        "error": "insufficient_scope",
        "scope": "files:read",
        "resource_metadata": mine,
    }


@pytest.mark.parametrize("value", [None, "", "Basic realm=x", "Bearer"])
def test_rewrite_adds_a_bearer_challenge_when_there_is_none(value: str | None) -> None:
    rewritten = challenge.rewrite(value, "https://gw/.well-known/oauth-protected-resource")
    assert challenge.param(rewritten, "resource_metadata") == (
        "https://gw/.well-known/oauth-protected-resource"
    )


def test_own_challenge() -> None:
    value = challenge.bearer("https://gw/m", error="insufficient_scope", scope="a b")
    assert (
        value == 'Bearer error="insufficient_scope", scope="a b", resource_metadata="https://gw/m"'
    )


# ---------------------------------------------------------------- public URLs

FORWARDED = {
    "x-forwarded-proto": "https",
    "x-forwarded-host": "mcp.example.com",
    "x-forwarded-prefix": "/tenant",
}


def test_forwarded_headers_ignored_unless_trusted() -> None:
    origin = request_origin("http", "10.0.0.2:8080", FORWARDED, trust_forwarded=False)
    assert origin.url("/mcp") == "http://10.0.0.2:8080/mcp"


def test_forwarded_headers_used_when_trusted() -> None:
    origin = request_origin("http", "10.0.0.2:8080", FORWARDED, trust_forwarded=True)
    assert origin.url("/mcp") == "https://mcp.example.com/tenant/mcp"


def test_rfc7239_forwarded_first_element_wins() -> None:
    headers = {"forwarded": 'for=1.2.3.4;proto=https;host="pub.example", for=10.0.0.1;proto=http'}
    origin = request_origin("http", "inner:80", headers, trust_forwarded=True)
    assert origin.base == "https://pub.example"


def test_default_port_dropped_and_other_port_kept() -> None:
    assert request_origin("https", "h.example:443", {}, trust_forwarded=False).base == (
        "https://h.example"
    )
    headers = {"x-forwarded-proto": "https", "x-forwarded-host": "h", "x-forwarded-port": "8443"}
    assert request_origin("http", "x", headers, trust_forwarded=True).base == "https://h:8443"


def test_insane_forwarded_values_are_ignored() -> None:
    headers = {"x-forwarded-proto": "javascript", "x-forwarded-host": "evil/../x"}
    assert request_origin("http", "gw:8080", headers, trust_forwarded=True).base == (
        "http://gw:8080"
    )


def test_configured_public_url_wins() -> None:
    url = resource_url(
        "https://pub.example/mcp", "/mcp", "http", "inner", FORWARDED, trust_forwarded=True
    )
    assert url == "https://pub.example/mcp"


# ------------------------------------------------------------------ documents


def test_well_known_urls() -> None:
    assert metadata_url("https://gw.example/public/mcp") == (
        "https://gw.example/.well-known/oauth-protected-resource/public/mcp"
    )
    assert metadata_url("https://gw.example/") == (
        "https://gw.example/.well-known/oauth-protected-resource"
    )
    assert insert_well_known("https://as.example/tenant1", "/.well-known/x") == (
        "https://as.example/.well-known/x/tenant1"
    )
    assert prm_candidates("http://u:1/mcp", "http://u:1/meta") == [
        "http://u:1/meta",
        "http://u:1/.well-known/oauth-protected-resource/mcp",
        "http://u:1/.well-known/oauth-protected-resource",
    ]


def test_authorization_server_candidates_follow_the_spec_order() -> None:
    assert as_candidates("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    assert as_candidates("https://auth.example.com/") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


def test_rewritten_document_names_the_gateway_and_keeps_the_servers() -> None:
    upstream = {
        "resource": "http://10.0.0.5:9000/mcp",
        "authorization_servers": ["https://as.example"],
        "scopes_supported": ["mcp"],
    }
    doc = rewrite_protected_resource(upstream, "https://gw.example/mcp")
    assert doc == {**upstream, "resource": "https://gw.example/mcp"}
    assert upstream["resource"] == "http://10.0.0.5:9000/mcp"  # not changed in place
    assert is_protected_resource(doc)
    assert not is_protected_resource({"authorization_servers": []})
    assert not is_protected_resource({"authorization_servers": ["ftp://x"]})


def test_default_endpoints_of_a_2025_03_26_server() -> None:
    doc = default_authorization_server("http://u:1")
    assert (doc["authorization_endpoint"], doc["token_endpoint"], doc["registration_endpoint"]) == (
        "http://u:1/authorize",
        "http://u:1/token",
        "http://u:1/register",
    )
