"""gateway/process/route_check.py: a route's targets judged together, and what a
person is shown of an upstream (never its secrets)."""

from __future__ import annotations

from gateway.process.route_check import TargetVerdict, judged_together, upstream_name
from gateway.upstream.settings import UpstreamSettings


def _reached(name: str, stateless: bool) -> TargetVerdict:
    revision = "2026-07-28" if stateless else "2025-11-25"
    return TargetVerdict(name, "streamable-http", revision, stateless=stateless)


def test_a_target_of_another_era_than_most_is_the_routes_problem() -> None:
    targets = [_reached("a", False), _reached("b", True), _reached("c", False)]
    judged = judged_together(targets)
    assert [t.ok for t in judged] == [True, False, True]
    assert "another protocol era" in judged[1].problem


def test_targets_of_one_era_and_unreached_ones_are_left_as_they_are() -> None:
    down = TargetVerdict("d", problem="nothing is listening")
    targets = [_reached("a", True), down, _reached("b", True)]
    assert [t.ok for t in judged_together(targets)] == [True, False, True]
    assert down.problem == "nothing is listening"


def test_an_upstream_is_named_without_its_secrets() -> None:
    url = UpstreamSettings("http://u:PW@host:8000/mcp?token=T", route="/r")
    assert upstream_name(url) == "http://host:8000/mcp?token=[redacted]"
    command = UpstreamSettings("", transport="stdio", command=["srv", "--token", "T"])
    assert upstream_name(command) == "srv --token '[redacted]'"
