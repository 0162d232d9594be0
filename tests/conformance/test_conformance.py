"""The conformance gate: the official MCP conformance suite, eight lanes, against baseline.json.

Each lane runs the whole suite once, in the suite's order (tests/conformance/run.py):
both kinds of fixture upstream directly (the control), through one `gateway serve` in
their own era, and through one in the other era; two lanes where the pass-through
lane answers again with it off.  baseline.json (committed) records
every lane's verdict per scenario; the gate is the one source of truth:

* a scenario recorded as `pass` that fails now, or recorded as `fail: <check ids>`
  that fails a check not listed, fails `test_lane_keeps_its_passes`,
  naming lane, scenario and failing checks;
* a scenario that passes but is recorded as failing (or not at all) fails
  `test_lane_gains_are_recorded`: record it in the same commit with
  `python -m tests.conformance.run --update-baseline` and commit the diff;
* scenarios under `excluded` (each with its reason) flip on their own and are not judged.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance import baseline
from tests.conformance.run import LANES, Lane, missing, run_all

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def lanes() -> Iterator[dict[str, Lane]]:
    reason = missing()
    if reason:
        pytest.fail(f"conformance suite not installed: {reason}", pytrace=False)
    yield run_all()


@pytest.fixture(scope="module")
def recorded() -> dict[str, object]:
    return baseline.load()


def _ran(lanes: dict[str, Lane], lane: str) -> Lane:
    ran = lanes[lane]
    assert not ran.error, f"{lane} did not run: {ran.error}"
    return ran


@pytest.mark.parametrize("lane", LANES)
def test_lane_keeps_its_passes(
    lanes: dict[str, Lane], recorded: dict[str, object], lane: str
) -> None:
    lost = baseline.compare(recorded, lane, _ran(lanes, lane)).lost
    assert not lost, "recorded as passing in baseline.json, fails now:\n" + "\n".join(lost)


@pytest.mark.parametrize("lane", LANES)
def test_lane_gains_are_recorded(
    lanes: dict[str, Lane], recorded: dict[str, object], lane: str
) -> None:
    gained = baseline.compare(recorded, lane, _ran(lanes, lane)).gained
    assert not gained, (
        "passes now but baseline.json does not say so; record it in this commit with "
        f"`{baseline.UPDATE}`:\n" + "\n".join(gained)
    )


@pytest.mark.parametrize("lane", [lane for lane in LANES if "via-gateway" in lane])
def test_gateway_exits_cleanly(lanes: dict[str, Lane], lane: str) -> None:
    """After the whole suite, the lane's gateway exits 0 on SIGTERM and logged no error."""
    assert not lanes[lane].gateway_log_errors, "\n".join(lanes[lane].gateway_log_errors)
