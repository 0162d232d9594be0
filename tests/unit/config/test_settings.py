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


def test_a_urls_user_info_is_the_routes_own_authorization() -> None:
    """A route URL with user info sends its own Basic Authorization: the client's is
    never forwarded there (aiohttp refuses a request carrying both, so every call
    failed as "unreachable"), and a 401 there is the route's (credentials_from)."""
    plain = RouteSpec.parse("/a=http://127.0.0.1:1/mcp")
    assert "authorization" in plain.forwarded_headers()
    assert plain.upstream_settings().credentials_from == ""
    spec = RouteSpec.parse("/a=http://u:p@127.0.0.1:1/mcp,also=http://v:q@127.0.0.1:2/mcp")
    assert "authorization" not in spec.forwarded_headers()
    assert "traceparent" in spec.forwarded_headers()
    first, second = spec.target_settings()
    assert first.credentials_from == second.credentials_from == "the user info of its URL"
    # Its targets are one server: user info on some only would leave the others with
    # neither the route's credentials nor the client's.
    for mixed in ("http://u:p@h:1/mcp,also=http://h:2/mcp", "http://h:1/mcp,also=http://u@h:2/mcp"):
        with pytest.raises(SettingsError, match="user info on some"):
            RouteSpec.parse(f"/a={mixed}")
    # Empty user info sends nothing (as the HTTP client reads it): the client's goes on.
    assert "authorization" in RouteSpec.parse("/a=http://@127.0.0.1:1/mcp").forwarded_headers()
    stdio = RouteSpec.parse("/s=stdio:gateway stdio --upstream http://u:p@127.0.0.1:1/mcp")
    assert "authorization" in stdio.forwarded_headers()  # its command's URL is the child's


def test_authorization_set_both_by_url_and_header_is_refused() -> None:
    with pytest.raises(SettingsError, match="user info sends its own Authorization") as caught:
        RouteSpec.parse("/a=http://u:SECRETPW@127.0.0.1:1/mcp,headers_from_env=Authorization:X")
    assert "SECRETPW" not in str(caught.value)
    assert "\n" not in str(caught.value)
    header = RouteSpec.parse("/a=http://127.0.0.1:1/mcp,headers_from_env=Authorization:X")
    assert header.upstream_settings().credentials_from == "headers_from_env X"


@pytest.mark.parametrize(
    ("route", "said"),
    [
        ("/b=stdio:srv,transport=sse", "transport=sse is for an HTTP upstream"),
        ("/b=stdio:srv,transport=http", "transport=http is for an HTTP upstream"),
        ("/c=http://127.0.0.1:1/mcp,transport=stdio", "transport=stdio needs a stdio:COMMAND"),
        ("/d=stdio:srv --token SECRETX,also=http://h/mcp", "also= names more HTTP targets"),
    ],
)
def test_a_transport_that_cannot_carry_the_upstream_is_refused(route: str, said: str) -> None:
    """Refused as settings (check and serve alike): a URL with transport=stdio once
    passed `check` and then stopped `serve` with a traceback.  The error names the
    rule, never the route's whole input (a stdio command's secret options are in it)."""
    with pytest.raises(SettingsError, match=said) as caught:
        RouteSpec.parse(route)
    assert "SECRETX" not in str(caught.value) and "settings =" not in str(caught.value)


@pytest.mark.parametrize("route", ["/e=stdio:srv,transport=stdio", "/f=http://h/sse,transport=sse"])
def test_a_transport_that_fits_is_taken(route: str) -> None:
    RouteSpec.parse(route)


@pytest.mark.parametrize(
    "route",
    [
        "stdio:srv --api-key=SEKRET",  # no PATH= at all
        "/r=stdio:srv --api-key=SEKRET 'unclosed",  # the upstream's own error
        "/r=stdio:srv --token SEKRET,instances=0",  # another option's error
    ],
)
def test_no_route_error_repeats_a_commands_secret(route: str) -> None:
    with pytest.raises(SettingsError) as caught:
        RouteSpec.parse(route)
    assert "SEKRET" not in str(caught.value), caught.value


def test_routes_text_that_does_not_parse_is_not_repeated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_ROUTES", '[{"path": "/r", "upstream": "stdio:s --api-key=SEKRET"')
    with pytest.raises(SettingsError, match="not a JSON list") as caught:
        load_settings({})
    assert "SEKRET" not in str(caught.value), caught.value
