"""The one table of route options (issue 39): the reference page, `serve --help`, the
--route parser and the TOML schema agree; quoting keeps a comma inside a value;
unknown keys get "Did you mean"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gateway.config.route_options import BY_NAME, ROUTE_KEYS, reference
from gateway.config.settings import RouteSpec

REPO = Path(__file__).resolve().parents[2]


def gateway(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "gateway", *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)


def test_the_committed_reference_is_the_table() -> None:
    page = (REPO / "docs" / "reference" / "route-options.md").read_text()
    regenerate = "python -m gateway.config.route_options > docs/reference/route-options.md"
    assert page == reference(), f"run: {regenerate}"


def test_the_table_is_every_route_key() -> None:
    assert set(BY_NAME) | set(ROUTE_KEYS) == set(RouteSpec.model_fields)


def test_serve_help_lists_every_option() -> None:
    done = gateway("serve", "--help")
    text = " ".join(done.stdout.split()).replace("- ", "-")
    for name in BY_NAME:
        assert f"{name}=" in text, name


def test_a_comma_inside_quotes_stays_in_the_value() -> None:
    route = '/t=stdio:mytool "--dirs=/a,/b",env=LOG:debug|HOME:/tmp,cwd=/tmp'
    done = gateway("serve", "--route", route, "--check-config")
    assert done.returncode == 0, done.stderr
    (spec,) = json.loads(done.stdout)["routes"]
    assert RouteSpec.model_validate(spec).command == ["mytool", "--dirs=/a,/b"]
    assert spec["env"] == {"LOG": "debug", "HOME": "/tmp"}
    assert spec["cwd"] == "/tmp"


def test_a_quoted_url_keeps_its_comma() -> None:
    spec = RouteSpec.parse("/t='http://h/mcp?a=1,2',timeout=5")
    assert (spec.upstream, spec.timeout) == ("http://h/mcp?a=1,2", 5)
    # --check-config prints it as every output does, its query values hidden.
    done = gateway("serve", "--route", "/t='http://h/mcp?a=1,2',timeout=5", "--check-config")
    assert done.returncode == 0, done.stderr
    (shown,) = json.loads(done.stdout)["routes"]
    assert (shown["upstream"], shown["timeout"]) == ("http://h/mcp?a=[redacted]", 5)


def test_an_unknown_toml_key_names_the_nearest(tmp_path: Path) -> None:
    config = tmp_path / "g.toml"
    route = '[[routes]]\npath = "/m"\nupstream = "http://h/mcp"\ntimout = 3\n'
    config.write_text('listn = "1"\n' + route)
    done = gateway("serve", "--config", str(config))
    assert done.returncode == 2
    assert "listn: unknown setting (did you mean 'listen'?)" in done.stderr
    assert "routes.0.timout: unknown setting (did you mean 'timeout'?)" in done.stderr


def test_targets_options_are_bounded() -> None:
    """also= takes http(s) URLs only, at most 32; instances 1-32 and only for stdio;
    a check interval under 0.1 s would spin against the upstreams."""
    import pytest

    from gateway.config.settings import RouteSpec, SettingsError

    ok = RouteSpec.parse("/m=http://a:1/mcp,also=http://b:1/mcp|https://c:1/mcp,health_every=0.5")
    assert ok.also == ["http://b:1/mcp", "https://c:1/mcp"]
    for bad in (
        "/m=http://a:1/mcp,also=file:///etc/passwd",
        "/m=http://a:1/mcp,also=" + "|".join(f"http://h{n}:1/" for n in range(33)),
        "/m=http://a:1/mcp,instances=2",
        "/m=stdio:server,also=http://b:1/mcp",
        "/m=stdio:server,instances=33",
        "/m=http://a:1/mcp,also=http://b:1/mcp,health_every=0",
        "/m=http://a:1/mcp,also=http://b:1/mcp,health_every=0.001",
    ):
        with pytest.raises(SettingsError):
            RouteSpec.parse(bad)
