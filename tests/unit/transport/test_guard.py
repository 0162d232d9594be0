"""The Host/Origin guard (DNS-rebinding protection), one header set at a time."""

from __future__ import annotations

import pytest

from gateway.core import FailureKind
from gateway.transport.guard import OriginGuard


def allowed(guard: OriginGuard, **headers: str) -> bool:
    failure = guard.check(headers)
    assert failure is None or failure.kind is FailureKind.FORBIDDEN
    return failure is None


LOOPBACK = OriginGuard(loopback_only=True)
OPEN = OriginGuard(loopback_only=False)
LISTED = OriginGuard(
    loopback_only=False,
    allowed_hosts=["mcp.example.com", "Other.Example:8443", "[2001:db8::1]:443"],
    allowed_origins=["https://app.example.com/", "HTTPS://Tool.Example"],
)


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8080", "127.0.0.1:9", "[::1]:8080", "[::1]", "LOCALHOST:1"],
)
def test_loopback_bound_accepts_loopback_hosts(host: str) -> None:
    assert allowed(LOOPBACK, host=host)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "10.0.0.1", "[::2]:1"])
def test_loopback_bound_refuses_other_hosts(host: str) -> None:
    failure = LOOPBACK.check({"host": host})
    assert failure is not None and failure.kind is FailureKind.FORBIDDEN
    assert host in failure.message


def test_no_host_header_is_not_refused() -> None:
    assert allowed(LOOPBACK)


def test_not_loopback_and_no_list_accepts_any_host() -> None:
    assert allowed(OPEN, host="anything.example:1234")


def test_an_allowed_hosts_list_is_case_and_port_insensitive() -> None:
    assert allowed(LISTED, host="MCP.example.com:443")
    assert allowed(LISTED, host="other.example")
    assert allowed(LISTED, host="[2001:db8::1]:8443")
    assert allowed(LISTED, host="localhost:3000")  # loopback names always pass
    assert not allowed(LISTED, host="evil.example")
    assert not allowed(LISTED, host="mcp.example.com.evil.example")


def test_a_wildcard_host_accepts_any_even_loopback_bound() -> None:
    guard = OriginGuard(loopback_only=True, allowed_hosts=["*"])
    assert allowed(guard, host="anything.example")


def test_a_loopback_bound_list_still_refuses_unlisted_hosts() -> None:
    guard = OriginGuard(loopback_only=True, allowed_hosts=["mcp.internal"])
    assert allowed(guard, host="mcp.internal:80")
    assert allowed(guard, host="127.0.0.1:80")
    assert not allowed(guard, host="other.internal")


def test_listed_origins_match_without_case_or_trailing_slash() -> None:
    assert allowed(LISTED, origin="https://app.example.com")
    assert allowed(LISTED, origin="https://APP.example.com/")
    assert allowed(LISTED, origin="https://tool.example")
    assert not allowed(LISTED, origin="http://app.example.com")  # another scheme
    assert not allowed(LISTED, origin="https://app.example.com:8443")  # another port
    assert not allowed(LISTED, origin="https://evil.example")


def test_the_null_origin_is_refused_unless_listed() -> None:
    assert not allowed(LOOPBACK, origin="null")
    assert not allowed(OPEN, origin="null")
    assert allowed(OriginGuard(loopback_only=True, allowed_origins=["null"]), origin="null")


@pytest.mark.parametrize(
    "origin", ["http://localhost:5173", "http://127.0.0.1", "http://[::1]:8080"]
)
def test_a_loopback_page_may_use_a_loopback_gateway(origin: str) -> None:
    assert allowed(LOOPBACK, host="localhost:8080", origin=origin)


def test_a_remote_page_may_not_use_a_loopback_gateway() -> None:
    failure = LOOPBACK.check({"host": "localhost:8080", "origin": "https://evil.example"})
    assert failure is not None and "Origin" in failure.message


def test_not_loopback_a_loopback_origin_is_no_evidence_of_a_local_caller() -> None:
    # Reachable from the network, a page claiming loopback may be anyone's.
    assert not allowed(OPEN, origin="http://localhost:3000")
    assert not allowed(OPEN, origin="https://evil.example")
    # With a list, a gateway reachable from the network trusts only the list.
    assert not allowed(LISTED, origin="http://localhost:3000")


def test_a_wildcard_origin_accepts_any() -> None:
    guard = OriginGuard(loopback_only=False, allowed_origins=["*"])
    assert allowed(guard, origin="https://anything.example")
    assert allowed(guard, origin="null")


def test_host_is_checked_before_origin() -> None:
    failure = LOOPBACK.check({"host": "evil.example", "origin": "https://evil.example"})
    assert failure is not None and failure.message.startswith("Host")
