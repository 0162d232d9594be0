"""bench.spine counts hand-offs, doors and calls back up by caller (issue 38's figures)."""

from __future__ import annotations

import pytest

from bench import spine
from bench.path import Call


def call(file: str, name: str, caller: tuple[str, str] | None, fresh: bool = True) -> Call:
    return Call(file, name, 1, fresh, None if caller is None else (*caller, 1))


def test_layers_follow_the_import_contract() -> None:
    assert spine.layer_of("cli.py") == "cli"
    assert spine.layer_of("bridge/forwarder.py") == "bridge"
    assert spine.layer_of("upstream/carriers/h1.py") == "upstream.carriers"
    assert spine.layer_of("core/call.py") is None and spine.layer_of("wire/sse.py") is None
    order = spine.ranks()
    assert order["transport"] < order["bridge"] < order["upstream"] < order["upstream.carriers"]
    assert order["upstream.carriers"] < order["protocol"]


def test_handoffs_and_doors_are_counted_by_caller() -> None:
    forward = ("bridge/forwarder.py", "Forwarder.handle")
    calls = [
        call("bridge/forwarder.py", "Forwarder.handle", ("transport/inbound.py", "Runner._run")),
        call("upstream/link.py", "UpstreamLink.execute", forward),
        call("upstream/link.py", "UpstreamLink.execute", forward),
        call("upstream/link.py", "UpstreamLink.execute", forward, fresh=False),  # resumed
        call("core/call.py", "Call.with_id", forward),  # vocabulary: no hand-off
        call("bridge/forwarder.py", "Forwarder._pick", forward),  # same layer
        call("transport/inbound.py", "Runner._run", None),  # started by the loop
    ]
    figures = spine.spine(calls)
    assert figures["handoffs"] == 3
    assert figures["door_list"] == [
        "bridge/forwarder.py:Forwarder.handle",
        "upstream/link.py:UpstreamLink.execute",
    ]
    assert figures["started_by_loop"] == 1
    assert figures["calls_back_up"] == 0


@pytest.mark.parametrize(
    ("caller", "callee", "exempt"),
    [
        # Into a higher layer.
        (
            ("upstream/link.py", "UpstreamLink.handle"),
            ("bridge/forwarder.py", "Forwarder.handle"),
            "",
        ),
        # The ask closure a parked call hands down.
        (
            ("upstream/calls.py", "Calls.try_answer"),
            ("bridge/parked_calls.py", "ParkedCalls.handle.<locals>.ask"),
            "ask closure",
        ),
        # An era's override (what its revisions do) called by the adapter base.
        (
            ("protocol/adapter/server.py", "AdapterServerRole.decode_message"),
            ("protocol/adapter/stateless.py", "StatelessEra.check_params"),
            "revision hook",
        ),
    ],
)
def test_calls_back_up(caller: tuple[str, str], callee: tuple[str, str], exempt: str) -> None:
    figures = spine.spine([call(*callee, caller)])
    assert len(figures["back_up_list"]) == 1
    assert figures["calls_back_up"] == (0 if exempt else 1)
    assert figures["back_up_list"][0].endswith(f"({exempt})" if exempt else callee[1])


@pytest.mark.timeout(120)
def test_the_translated_round_keeps_the_spine_s_targets() -> None:
    """Issue 38's round, traced in a real gateway in front of the demo server: a change
    that calls back up a layer (a callback into the module that imports the caller),
    adds a door or lengthens the spine fails here, not a session later.  The full
    path's round (the lane off): since issue 50 the pass-through lane first tries
    each call of this pair and hands a question to the full path, which adds its own
    send's hand-offs to a round that asks (33 and 23 doors, against these 30 and 20)."""
    from bench import path

    figures = path.run("asyncio", warmup=2, settle=0.2, pass_through=False)["spine"]
    assert figures["calls_back_up"] == 0, figures["back_up_list"]
    assert figures["handoffs"] <= 30, figures["handoff_list"]
    assert figures["doors"] <= 20, figures["door_list"]
