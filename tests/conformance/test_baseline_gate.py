"""The gate's comparison itself (no suite run): what counts as lost, gained, excluded."""

from __future__ import annotations

from pathlib import Path

from tests.conformance import baseline
from tests.conformance.run import Check, Lane, Scenario


def _lane(**verdicts: bool) -> Lane:
    lane = Lane("legacy-via-gateway", "up", "2025-11-25")
    for name, ok in verdicts.items():
        status = "SUCCESS" if ok else "FAILURE"
        lane.scenarios[name] = Scenario(name, [Check(f"{name}-check", status, "boom")])
    return lane


def _recorded(excluded: dict[str, str] | None = None, **verdicts: str) -> dict[str, object]:
    return {
        "lanes": {"legacy-via-gateway": verdicts},
        "excluded": {"legacy-via-gateway": excluded or {}},
    }


def test_a_recorded_pass_that_fails_is_lost_with_lane_scenario_and_check() -> None:
    drift = baseline.compare(_recorded(ping="pass"), "legacy-via-gateway", _lane(ping=False))
    assert drift.lost == ["legacy-via-gateway ping: ping-check: boom"]
    assert drift.gained == []


def test_a_check_newly_failing_in_a_recorded_failure_is_lost() -> None:
    lane = _lane(tools=False)
    lane.scenarios["tools"].checks.append(Check("wire-schema-valid", "FAILURE", "bad"))
    drift = baseline.compare(_recorded(tools="fail: tools-check"), "legacy-via-gateway", lane)
    assert drift.lost == ["legacy-via-gateway tools: also fails wire-schema-valid: bad"]


def test_a_recorded_pass_that_did_not_run_is_lost() -> None:
    drift = baseline.compare(_recorded(ping="pass"), "legacy-via-gateway", _lane())
    assert drift.lost == ["legacy-via-gateway ping: did not run"]


def test_a_pass_not_recorded_as_one_is_gained() -> None:
    recorded = _recorded(ping="fail: ping-check")
    drift = baseline.compare(recorded, "legacy-via-gateway", _lane(ping=True, tools=True))
    assert drift.lost == []
    assert drift.gained == [
        "legacy-via-gateway ping: passes, recorded as 'fail: ping-check'",
        "legacy-via-gateway tools: passes, recorded as 'absent'",
    ]


def test_unchanged_and_excluded_scenarios_are_not_judged() -> None:
    recorded = _recorded(
        {"flaky": "flips under load"}, ping="pass", tools="fail: tools-check", flaky="pass"
    )
    lane = _lane(ping=True, tools=False, flaky=False)
    assert baseline.compare(recorded, "legacy-via-gateway", lane) == baseline.Drift()


def test_record_keeps_exclusions_and_writes_one_line_per_scenario(tmp_path: Path) -> None:
    old = {"excluded": {"legacy-via-gateway": {"flaky": "flips under load"}}}
    data = baseline.record({"legacy-via-gateway": _lane(ping=True, tools=False)}, old)
    assert data["lanes"] == {"legacy-via-gateway": {"ping": "pass", "tools": "fail: tools-check"}}
    assert data["excluded"] == old["excluded"]
    path = tmp_path / "b.json"
    baseline.write(data, path)
    assert '  "ping": "pass",\n' in path.read_text()
    assert baseline.load(path) == data
