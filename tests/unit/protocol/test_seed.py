"""The seed design's own examples, run against this package."""

from gateway.core import Failure, FailureKind
from gateway.protocol.selection import AdapterSet


def test_adapter_by_version() -> None:
    adapter = AdapterSet.default().by_version["2026-07-28"]
    assert adapter.version == "2026-07-28"
    assert type(adapter).__name__ == "Adapter2026_07_28"


def test_behavioural_flags() -> None:
    flags = {
        adapter.version: (
            adapter.can_ask,
            adapter.can_push_ask,
            adapter.asks_in_arguments,
            adapter.has_handshake,
            adapter.allows_batch,
        )
        for adapter in AdapterSet.default().adapters
    }
    # The seed's table, but for one column where the specification says otherwise:
    # 2025-03-26 and 2024-11-05 define sampling and roots as server requests, so
    # their servers do push asks (the seed says False); elicitation, which they
    # lack, travels in arguments.  `can_push_ask` is derived from `pushable_asks`.
    assert flags == {
        #                  can_ask  push   arguments  handshake  batch
        "2026-07-28": (True, False, False, False, False),
        "2025-11-25": (False, True, False, True, False),
        "2025-06-18": (False, True, False, True, False),
        "2025-03-26": (False, True, True, True, True),
        "2024-11-05": (False, True, True, True, False),
    }


def test_push_is_what_the_revision_can_push() -> None:
    for adapter in AdapterSet.default().adapters:
        assert adapter.can_push_ask == bool(adapter.pushable_asks)
    pushed = {a.version: {k.value for k in a.pushable_asks} for a in AdapterSet.default().adapters}
    assert pushed["2024-11-05"] == pushed["2025-03-26"] == {"sampling/createMessage", "roots/list"}
    assert pushed["2026-07-28"] == set()


def test_carries_state_is_derived() -> None:
    carries = {a.version for a in AdapterSet.default().adapters if a.carries_state}
    assert carries == {"2026-07-28", "2025-03-26", "2024-11-05"}


def test_failure_mapping() -> None:
    modern = AdapterSet.default().by_version["2026-07-28"]
    legacy = AdapterSet.default().by_version["2025-11-25"]
    unknown = Failure(FailureKind.UNKNOWN_METHOD, "no such method")
    assert modern.http_status(unknown) == 404
    assert legacy.http_status(unknown) == 200


def test_modern_only_codes() -> None:
    adapters = AdapterSet.default().by_version
    missing = Failure(FailureKind.MISSING_CAPABILITY, "needs elicitation")
    version = Failure(FailureKind.UNSUPPORTED_VERSION, "no")
    assert adapters["2026-07-28"].error_code(missing) == -32021
    assert adapters["2026-07-28"].error_code(version) == -32022
    for legacy in ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"):
        assert adapters[legacy].error_code(missing) not in (-32021, -32022)
        assert adapters[legacy].error_code(version) not in (-32021, -32022)


def test_the_legacy_chain_is_several_classes_deep_and_the_eras_are_siblings() -> None:
    """Each handshake-era revision subclasses the one before it (the seed's "subclass
    the nearest revision and override what differs"); the stateless era, where nearly
    everything differs, has a base of its own beside the handshake era's (issue 38)."""
    from gateway.protocol.adapter.handshake import HandshakeEra
    from gateway.protocol.adapter.stateless import StatelessEra

    by_version = AdapterSet.default().by_version
    legacy = type(by_version["2025-11-25"])
    names = [c.__name__ for c in legacy.__mro__ if c.__name__.startswith("Adapter2")]
    assert names == [
        "Adapter2025_11_25",
        "Adapter2025_06_18",
        "Adapter2025_03_26",
        "Adapter2024_11_05",
    ]
    modern = type(by_version["2026-07-28"])
    assert [c.__name__ for c in modern.__mro__ if c.__name__.startswith("Adapter2")] == [
        "Adapter2026_07_28"
    ]
    assert issubclass(modern, StatelessEra) and not issubclass(modern, HandshakeEra)
    assert all(issubclass(type(a), HandshakeEra) for a in AdapterSet.default().handshake)


def test_argument_failures_are_results() -> None:
    from gateway.core import Call, ClientContext, Operation, ServerProfile

    for adapter in AdapterSet.default().adapters:
        call = Call(
            id=7,
            operation=Operation.TOOLS_CALL,
            method="tools/call",
            params={"name": "add"},
            client=ClientContext(adapter.version),
        )
        failure = Failure(FailureKind.INVALID_ARGUMENTS, "a must be an integer")
        message = adapter.encode(call, ServerProfile(), failure)
        assert message is not None
        assert "error" not in message
        assert message["result"]["isError"] is True
        assert message["result"]["content"][0]["text"] == "a must be an integer"
