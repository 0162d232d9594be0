"""The conformance gate's baseline: per lane, per scenario, the verdict last recorded.

baseline.json holds, per lane, each scenario as `"pass"` or `"fail: <failing check
ids>"` (one line each, sorted, so a re-recording reads as a plain diff), and under
`excluded` the scenarios that flip on their own, with the reason; the gate ignores
those.  `compare` is the gate: a scenario recorded as passing that no longer passes
is lost, and so is a check newly failing in a scenario recorded as failing (its
recorded check ids are the ones allowed to fail); one that passes but is not
recorded as passing is gained and must be
recorded (`python -m tests.conformance.run --update-baseline`) in the same commit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.conformance.run import Lane

PATH = Path(__file__).with_name("baseline.json")
UPDATE = "python -m tests.conformance.run --update-baseline"
PASS = "pass"


def load(path: Path = PATH) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {"lanes": {}, "excluded": {}}


def write(data: Mapping[str, Any], path: Path = PATH) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def verdict(lane: Lane, scenario: str) -> str:
    s = lane.scenarios[scenario]
    if s.passed:
        return PASS
    ids = sorted({c.id for c in s.failures}) or ["no verdict"]
    return "fail: " + ", ".join(ids)


def record(lanes: Mapping[str, Lane], old: Mapping[str, Any]) -> dict[str, Any]:
    """This run's verdicts; the exclusions (written by hand, with reasons) are kept."""
    return {
        "_about": (
            f"Conformance gate baseline (tests/conformance/baseline.py). Re-record with: {UPDATE}"
        ),
        "lanes": {
            name: {s: verdict(lane, s) for s in sorted(lane.scenarios)}
            for name, lane in lanes.items()
        },
        "excluded": dict(old.get("excluded", {})),
    }


@dataclass
class Drift:
    lost: list[str] = field(default_factory=list)
    gained: list[str] = field(default_factory=list)


def compare(recorded: Mapping[str, Any], name: str, lane: Lane) -> Drift:
    """How `lane`'s run differs from what `recorded` holds for it."""
    drift = Drift()
    want: Mapping[str, str] = recorded.get("lanes", {}).get(name, {})
    skip: Mapping[str, str] = recorded.get("excluded", {}).get(name, {})
    for scenario in sorted(set(want) | set(lane.scenarios)):
        if scenario in skip:
            continue
        ran = lane.scenarios.get(scenario)
        was = want.get(scenario)
        if was == PASS and (ran is None or not ran.passed):
            why = ran.summary() if ran else "did not run"
            drift.lost.append(f"{name} {scenario}: {why or 'no check judged'}")
        elif was is not None and ran is not None and not ran.passed:
            # A scenario recorded as failing must not fail more of its checks.
            allowed = set(was.removeprefix("fail: ").split(", "))
            new = [c for c in ran.failures if c.id not in allowed]
            if new:
                why = "; ".join(f"{c.id}: {c.message}"[:200] for c in new[:3])
                drift.lost.append(f"{name} {scenario}: also fails {why}")
        elif ran is not None and ran.passed and was != PASS:
            drift.gained.append(f"{name} {scenario}: passes, recorded as {was or 'absent'!r}")
    return drift
