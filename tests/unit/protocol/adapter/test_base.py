"""AdapterBase: what a revision class derives from its flags when it is defined."""

from __future__ import annotations

import pytest

from gateway.protocol.adapter.base import AdapterBase, decode_header_value, encode_header_value
from gateway.protocol.v2024_11_05 import Adapter2024_11_05
from gateway.protocol.v2025_06_18 import Adapter2025_06_18
from gateway.protocol.v2026_07_28 import Adapter2026_07_28


@pytest.mark.parametrize(
    ("can_ask", "in_arguments", "carries"),
    [(False, False, False), (True, False, True), (False, True, True), (True, True, True)],
)
def test_carries_state_is_derived_from_the_ask_flags_of_each_new_class(
    can_ask: bool, in_arguments: bool, carries: bool
) -> None:
    """A call carries state across rounds when its client is asked in results or in
    arguments: a new revision class gets that from its own flags, not its base's."""
    for base in (Adapter2025_06_18, Adapter2026_07_28):
        revision = type(
            "Revision", (base,), {"can_ask": can_ask, "asks_in_arguments": in_arguments}
        )
        assert revision.carries_state is carries, (base, can_ask, in_arguments)


def test_a_class_without_the_flags_carries_no_state() -> None:
    assert type("Bare", (AdapterBase,), {}).carries_state is False


def test_the_revisions_say_it_as_their_eras_do() -> None:
    assert Adapter2024_11_05.carries_state and Adapter2026_07_28.carries_state
    assert not Adapter2025_06_18.carries_state


@pytest.mark.parametrize("value", ["plain", "naïve ☃", "", "=?base64?not?="])
def test_header_values_round_trip(value: str) -> None:
    assert decode_header_value(encode_header_value(value)) == value
