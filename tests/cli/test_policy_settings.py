"""Route policy settings: exposure rules and rate limits as route options, config file
keys and gateway-wide defaults; bad values refused on one line; `serve --help`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gateway.config.settings import RouteSpec, SettingsError, load_settings
from gateway.policy import Rate, Rule
from gateway.process.app import Gateway
from gateway.process.cli import app

UPSTREAM = "http://127.0.0.1:3000/mcp"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("GATEWAY_"):
            monkeypatch.delenv(name)


def refuse(*args: str) -> str:
    result = CliRunner().invoke(app, ["serve", *args, "--check-config"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_route_options_take_rules_and_rates() -> None:
    spec = RouteSpec.parse(
        f"/mcp={UPSTREAM},tools=allow:search_*|read_file,prompts=deny:secret_*,"
        "resources=allow:file:///public/*,rate=10/s,burst=5,tool_rate=2/m,tool_burst=1,"
        "rate_fallback=closed"
    )
    assert spec.tools == "allow:search_*|read_file"
    assert spec.prompts == "deny:secret_*"
    assert spec.resources == "allow:file:///public/*"
    assert (spec.rate, spec.burst, spec.tool_rate, spec.tool_burst) == ("10/s", 5, "2/m", 1)
    assert spec.rate_fallback == "closed"


def test_a_rule_may_go_on_after_commas_in_a_route_flag() -> None:
    spec = RouteSpec.parse(f"/mcp={UPSTREAM},tools=allow:search_*,read_file,timeout=5")
    assert Rule.parse(spec.tools or "") == Rule("allow", ("search_*", "read_file"))
    assert spec.timeout == 5.0


@pytest.mark.parametrize(
    ("option", "problem"),
    [
        ("tools=search_*", "tools = 'search_*': expected allow:PATTERN"),
        ("prompts=allow:", "names no pattern"),
        ("rate=fast", "rate = 'fast': expected N/s"),
        ("tool_rate=0/s", "above 0"),
        ("burst=0", "burst = '0'"),
        ("rate_fallback=maybe", "rate_fallback = 'maybe'"),
        ("read_file", "unknown option 'read_file'"),  # no rule before it to continue
    ],
)
def test_bad_policy_options_are_refused_by_name(option: str, problem: str) -> None:
    error = refuse("--route", f"/mcp={UPSTREAM},{option}")
    assert problem in error, error


def test_the_config_file_and_gateway_wide_defaults(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(
        f"""
rate = "100/m"
burst = 20
tool_rate = "5/s"
rate_fallback = "closed"

[[routes]]
path = "/a"
upstream = "{UPSTREAM}"
tools = "deny:delete_*|drop_*"

[[routes]]
path = "/b"
upstream = "{UPSTREAM}"
rate = "1/s"
tool_rate = "off"
rate_fallback = "open"
"""
    )
    settings = load_settings({"config": config})
    gateway = Gateway.from_settings(settings)
    a, b = (gateway._policy(spec) for spec in settings.routes)
    assert a is not None and b is not None
    assert a.exposure is not None and a.exposure.tools == Rule("deny", ("delete_*", "drop_*"))
    assert a.limiter is not None
    assert a.limiter.rate == Rate(100, 60.0, 20) and a.limiter.tool_rate == Rate(5, 1.0, 5)
    assert a.limiter.fallback == "closed"
    assert b.exposure is None and b.limiter is not None
    assert b.limiter.rate == Rate(1, 1.0, 1)  # its own rate: its own burst (the default)
    assert b.limiter.tool_rate is None and b.limiter.fallback == "open"


def test_a_route_without_policy_has_none() -> None:
    settings = load_settings({"routes": [f"/mcp={UPSTREAM}"]})
    assert Gateway.from_settings(settings)._policy(settings.routes[0]) is None
    settings = load_settings({"routes": [f"/mcp={UPSTREAM},rate=off"]})
    assert Gateway.from_settings(settings)._policy(settings.routes[0]) is None


def test_defaults_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_RATE", "3/s")
    monkeypatch.setenv("GATEWAY_RATE_FALLBACK", "closed")
    settings = load_settings({"routes": [f"/mcp={UPSTREAM}"]})
    policy = Gateway.from_settings(settings)._policy(settings.routes[0])
    assert policy is not None and policy.limiter is not None
    assert (policy.limiter.rate, policy.limiter.fallback) == (Rate(3, 1.0, 3), "closed")
    monkeypatch.setenv("GATEWAY_RATE", "three")
    with pytest.raises(SettingsError, match="rate = 'three'"):
        load_settings({})


def test_flags_and_check_config() -> None:
    result = CliRunner().invoke(
        app,
        [
            "serve",
            "--route",
            f"/mcp={UPSTREAM},tools=allow:a",
            "--rate",
            "10/s",
            "--tool-rate",
            "1/s",
            "--rate-fallback",
            "closed",
            "--check-config",
        ],
    )
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    assert (data["rate"], data["tool_rate"], data["rate_fallback"]) == ("10/s", "1/s", "closed")
    assert data["routes"][0]["tools"] == "allow:a"


def test_serve_help_shows_the_policy_options() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for needle in (
        "tools=allow:PATTERN|...",
        "prompts=",
        "resources=",
        "rate=N/s",
        "burst=N",
        "tool_rate=",
        "tool_burst=",
        "rate_fallback=open|closed",
        "--rate ",
        "--tool-rate",
        "--rate-fallback",
    ):
        assert needle in text, needle
