"""The OAuth route options and --trust-forwarded."""

from __future__ import annotations

import pytest

from gateway.config.settings import RouteSpec, SettingsError, load_settings


def test_gateway_mode_options_parse() -> None:
    spec = RouteSpec.parse(
        "/mcp=http://u:1/mcp,auth=gateway,public_url=https://pub.example/mcp,"
        "auth_issuer=https://as.example,auth_scopes=mcp|mcp:admin"
    )
    assert (spec.auth, spec.public_url, spec.auth_scopes) == (
        "gateway",
        "https://pub.example/mcp",
        ["mcp", "mcp:admin"],
    )


@pytest.mark.parametrize(
    "options",
    ["auth=gateway", "auth=gateway,public_url=https://p/mcp", "auth=other", "public_url=ftp://x"],
)
def test_bad_auth_options_are_one_line_errors(options: str) -> None:
    with pytest.raises(SettingsError) as info:
        RouteSpec.parse(f"/mcp=http://u:1/mcp,{options}")
    assert "\n" not in str(info.value)


def test_introspection_credential_comes_from_the_environment() -> None:
    spec = RouteSpec.parse(
        "/mcp=http://u:1/mcp,auth=gateway,public_url=https://p/mcp,auth_issuer=https://as,"
        "auth_introspection_url=https://as/introspect,auth_introspection_auth_env=INTRO"
    )
    assert spec.introspection_auth({"INTRO": "Basic eA=="}) == "Basic eA=="
    with pytest.raises(SettingsError, match="INTRO is not set"):
        spec.introspection_auth({})


def test_trust_forwarded_defaults_off() -> None:
    assert load_settings({}).trust_forwarded is False
    assert load_settings({"trust_forwarded": True}).trust_forwarded is True
