"""Which revision pairs the pass-through lane carries (transport/passthrough.py)."""

from __future__ import annotations

import pytest

from gateway.protocol import AdapterSet
from gateway.transport.passthrough import pair

ADAPTERS = AdapterSet.default()
HANDSHAKE = ("2025-06-18", "2025-11-25")


@pytest.mark.parametrize("version", [*HANDSHAKE, "2026-07-28"])
def test_the_same_revision_is_carried(version: str) -> None:
    assert pair(ADAPTERS, ADAPTERS.by_version[version], version)


@pytest.mark.parametrize("client", HANDSHAKE)
def test_a_handshake_era_client_is_carried_to_a_stateless_upstream(client: str) -> None:
    assert pair(ADAPTERS, ADAPTERS.by_version[client], "2026-07-28")


@pytest.mark.parametrize("upstream", HANDSHAKE)
def test_a_stateless_client_is_carried_to_a_handshake_era_upstream(upstream: str) -> None:
    """To its pool (the link decides when): a question is held for the full path."""
    assert pair(ADAPTERS, ADAPTERS.by_version["2026-07-28"], upstream)


@pytest.mark.parametrize(
    ("client", "upstream"),
    [
        ("2026-07-28", None),  # the upstream's revision not known yet
        ("2026-07-28", "2099-01-01"),  # a revision this gateway does not speak
        ("2025-06-18", "2025-11-25"),  # another handshake-era revision
        ("2025-11-25", None),  # the upstream's revision not known yet
        ("2025-11-25", "2099-01-01"),  # a revision this gateway does not speak
    ],
)
def test_other_pairs_take_the_full_path(client: str, upstream: str | None) -> None:
    assert not pair(ADAPTERS, ADAPTERS.by_version[client], upstream)
