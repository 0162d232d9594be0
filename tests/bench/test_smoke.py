"""The scale benchmarks run at their tiniest size, so they cannot rot unseen.

Not a measure of anything: the figures of a run this small (and on a shared
machine) mean nothing, and nothing here compares them with a target.  What is
checked is that every path each benchmark drives still works end to end (real
upstreams and gateways, as the benchmark starts them) and that its report has
the shape its tables are printed from.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench import idle, scale, size, store_burst

pytestmark = pytest.mark.timeout(300)


def run_json(main: Any, argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main([*argv, "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def test_idle_opens_holds_and_ends_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    report = run_json(idle.main, ["--tiny"], capsys)
    rows = {row["kind"]: row for row in report["rows"]}
    assert list(rows) == [kind.key for kind in idle.KINDS]
    for kind in idle.KINDS:
        row = rows[kind.key]
        assert row["count"] == (1 if kind.stdio else 3)
        if kind.gauge:
            # Every one of them was open, and every one ended again.
            assert row["gauge_open"] - row["gauge_start"] >= row["count"], row
            assert row["gauge_end"] <= row["gauge_start"], row
    assert rows["stdio"]["children_open"] >= 1 and rows["stdio"]["children_end"] == 0
    assert "KiB/thing" in idle.render(report)


def test_size_measures_every_path_at_two_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    report = run_json(size.main, ["--tiny"], capsys)
    assert set(report["measures"]) == {"tools", "results", "batches"}
    for measure, rows in report["measures"].items():
        assert {row["path"] for row in rows} == {p.label for p in size.paths_of(measure)}
        for row in rows:
            assert [p["size"] for p in row["points"]] == list(report["config"][measure])
            assert all(p["calls"] >= 2 for p in row["points"])
            if not row["direct"]:
                assert all(p["peak_kib"] is not None for p in row["points"])
    assert "slope of the last step" in size.render(report)


def test_scale_runs_every_path_at_two_worker_counts(capsys: pytest.CaptureFixture[str]) -> None:
    report = run_json(scale.main, ["--tiny"], capsys)
    config = report["config"]
    assert config["workers"] == [1, 2]
    rows = {(row["path"], row["workers"]) for row in report["rows"]}
    assert rows == {(path, n) for path in config["paths"] for n in (1, 2)}
    for row in report["rows"]:
        for side in ("gateway", "reference", "direct"):
            assert row[side]["calls"] > 0 and row[side]["errors"] == 0, row[side]
    assert report["verdict"]["too_small"] in (True, False)
    assert "req/s" in scale.render(report)


def test_store_burst_runs_every_path(capsys: pytest.CaptureFixture[str]) -> None:
    report = run_json(store_burst.main, ["--tiny"], capsys)
    rows = {row["path"]: row for row in report["rows"]}
    assert len(rows) == 3 and all(row["burst"] == 20 for row in rows.values())
    assert all(row["refused"] == 0 and row["ops_per_s"] > 0 for row in rows.values()), rows
    assert "ops/s" in store_burst.render(report)


def test_faults_never_runs_a_plain_tool_twice(capsys: pytest.CaptureFixture[str]) -> None:
    """bench.faults in a quarter of its time: its one invariant is checked here too
    (a `plain` op the servers recorded twice makes it exit 1)."""
    from bench import faults

    report = run_json(faults.main, ["--tiny"], capsys)
    assert report["run_twice_unsafe"] == 0
    assert report["unsafe_retry_advice"] == 0 and report["said_not_sent_but_ran"] == 0
    assert report["hang_shown_up"] == 0 and report["session_client"]["calls"] > 0
    assert report["answered"] > 0 and report["failed_unclear"] == 0
    assert {row["phase"] for row in report["phases"]} == {label for _, label, _ in faults.PHASES}


def test_storeops_counts_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import storeops

    report = run_json(storeops.main, ["-n", "5"], capsys)
    assert list(report["kinds"]) == list(storeops.KINDS)
    assert report["kinds"]["session request, other replica"]["sent"] >= 0.5
    assert report["redis"]


def test_clientside_drives_every_lane_and_reports_each_process_s_cost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench import clientside

    report = run_json(clientside.main, ["--rounds", "1", "--calls", "64", "--warmup", "16"], capsys)
    assert list(report["lanes"]) == [lane.key for lane in clientside.LANES]
    for lane in report["lanes"].values():
        assert lane["calls_per_s"] > 0 and lane["mid_user_us"] >= 0, lane  # (10 ms ticks)
        assert lane["answer"] in ("json", "event-stream", "event-stream,json"), lane


def test_lanes_measures_each_lane_against_the_byte_proxy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench import lanes

    report = run_json(lanes.main, ["--rounds", "1", "--seconds", "0.3"], capsys)
    assert list(report["lanes"]) == [lane.key for lane in lanes.LANES]
    for key, lane in report["lanes"].items():
        assert lane["rps"] > 0 and lane["p50_ms"] > 0, lane
        if key.startswith("ref-"):
            assert lane["ratio"] == 1.0  # each proxy is its own reference
            assert lane["paired"] == [1.0, 1.0, 1.0] and lane["cpu_ratio"] == 1.0, lane
        else:
            low, high = lane["paired"][1:]
            assert 0 < low <= lane["paired"][0] <= high, lane


def test_pinned_lanes_load_each_gateway_and_its_proxy_side_by_side(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """wrk and the Node upstreams on CPU 0, the middles on CPU 1: every gateway lane
    is measured at once with its proxy, and both middles were busy."""
    from bench import lanes

    report = run_json(lanes.main, ["--pinned", "--rounds", "1", "--seconds", "1"], capsys)
    assert list(report["lanes"]) == [lane.key for lane in lanes.LANES]
    for key, lane in report["lanes"].items():
        assert lane["rps"] > 0 and lane["p50_ms"] > 0 and lane["mid_busy"] > 0.1, lane
        if not key.startswith("ref-"):
            assert lane["paired"][0] == lane["ratio"] > 0, lane  # one round: one pair
            assert lane["cpu_ratio"] is not None and lane["cpu_ratio"] > 0, lane
