"""Keyed principals: one caller per credential however its scheme is spelled,
tenant headers part of the key, and never the token itself."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.bridge.principal import ANONYMOUS, Principals

KEY = b"k" * 32


def test_no_credentials_is_anonymous() -> None:
    assert Principals(KEY).of({}) == ANONYMOUS


def test_principals_are_keyed_and_never_the_token() -> None:
    headers = {"authorization": "Bearer secret-token"}
    one, other = Principals(KEY).of(headers), Principals(b"x" * 32).of(headers)
    assert one != other
    assert "secret-token" not in one
    assert one == Principals(KEY).of(dict(headers))


def test_one_token_is_one_caller_however_its_scheme_is_spelled() -> None:
    principals = Principals(KEY)
    one = principals.of({"authorization": "Bearer t"})
    for spelling in ("bearer t", "BEARER t", "bEaReR t", "Bearer  t", "Bearer\tt", " Bearer t "):
        assert principals.of({"authorization": spelling}) == one, spelling
    # The token itself is case-sensitive: another token is another caller.
    assert principals.of({"authorization": "Bearer T"}) != one
    assert principals.of({"authorization": "Basic t"}) != one


@given(st.text(min_size=1).filter(lambda t: t.strip() == t and " " not in t and t.isprintable()))
def test_the_scheme_is_case_folded_for_any_token(token: str) -> None:
    principals = Principals(KEY)
    assert principals.of({"authorization": f"BEARER {token}"}) == principals.of(
        {"authorization": f"bearer {token}"}
    )


def test_tenant_headers_are_part_of_the_principal() -> None:
    principals = Principals(KEY, tenant_headers=("X-Tenant",))
    token = {"authorization": "Bearer t"}
    a = principals.of({**token, "x-tenant": "a"})
    b = principals.of({**token, "x-tenant": "b"})
    assert a != b
    assert principals.of({"x-tenant": "a"}) != ANONYMOUS


def test_header_values_cannot_run_together() -> None:
    principals = Principals(KEY, tenant_headers=("x-tenant",))
    assert principals.of({"authorization": "ab", "x-tenant": "c"}) != principals.of(
        {"authorization": "a", "x-tenant": "bc"}
    )
