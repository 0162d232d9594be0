"""Every URL the gateway connects to passes one check: generated hosts, ports, IPv6
literals, schemes and IDNA names either pass and can be connected to as written, or
are refused with one line that repeats no secret."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.urls import http_url

CANARY = "CANARYu8Jw"


@pytest.mark.parametrize(
    "text",
    [
        "http://no-such-host..invalid/mcp",
        "http://" + "a" * 64 + ".example/mcp",
        "http://[::1",
        "http://127.0.0.1:99999/x",
        "http://127.0.0.1:0/x",
        "http:///mcp",
        "http://a b/",
        "ftp://example.com/",
        "http://exa\r\nmple.com/",
        "",
        "http://" + ".".join(["abcdefgh"] * 40) + "/",
    ],
)
def test_refused(text: str) -> None:
    with pytest.raises(ValueError):
        http_url(text)


@pytest.mark.parametrize(
    "text",
    [
        "http://127.0.0.1:8000/mcp",
        "https://example.com/mcp",
        "http://[::1]:8000/mcp",
        "http://bücher.example/mcp",
        "http://a_b.internal/mcp",
        "http://u:p@example.com/mcp?token=t",
    ],
)
def test_accepted(text: str) -> None:
    http_url(text)


def _connectable(text: str) -> None:
    """What a resolver and a socket need of the URL that passed."""
    url = http_url(text)
    assert url.host is not None and url.port is not None and 0 < url.port < 65536
    try:
        ipaddress.ip_address(url.host.partition("%")[0])
    except ValueError:
        url.host.encode("idna")  # the resolver's own encoding: raises on a bad name


label = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/?#@[]:\\"),
    max_size=70,
)


@settings(max_examples=400)
@given(
    scheme=st.sampled_from(["http", "https", "HTTP", "ftp", "file", ""]),
    labels=st.lists(label, min_size=1, max_size=5),
    port=st.one_of(st.none(), st.integers(-5, 70_000), st.text("0123456789x", max_size=7)),
    ipv6=st.booleans(),
    userinfo=st.booleans(),
)
def test_a_url_that_passes_can_be_connected_to(
    scheme: str, labels: list[str], port: object, ipv6: bool, userinfo: bool
) -> None:
    host = "[::1]" if ipv6 else ".".join(labels)
    text = f"{scheme}://{f'u:{CANARY}@' if userinfo else ''}{host}"
    text += f":{port}" if port is not None else ""
    text += f"/mcp?token={CANARY}"
    try:
        _connectable(text)
    except ValueError as exc:
        assert CANARY not in str(exc)
        assert "\n" not in str(exc)
