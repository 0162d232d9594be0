"""Settings: flags over environment over the config file, checked on load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gateway.config.settings import RouteSpec, Settings, SettingsError, load_settings
from gateway.process.cli import app

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config" / "gateway.example.toml"
UPSTREAM = "http://127.0.0.1:3000/mcp"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GATEWAY_* variable of the developer's shell leaks into a test."""
    import os

    for name in list(os.environ):
        if name.startswith("GATEWAY_"):
            monkeypatch.delenv(name)


def check(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """`gateway serve ARGS --check-config`: the effective settings."""
    result = CliRunner().invoke(app, ["serve", *args, "--check-config"], env=env)
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def refuse(*args: str, env: dict[str, str] | None = None) -> str:
    """`gateway serve ARGS` refused: exit code 2, one `Error:` line, no traceback."""
    result = CliRunner().invoke(app, ["serve", *args, "--check-config"], env=env)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.output
    return errors[0]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return path


# ------------------------------------------------------------------ flags


def test_route_flag_keeps_its_syntax_and_takes_every_option() -> None:
    spec = RouteSpec.parse(
        f"/mcp={UPSTREAM},transport=sse,timeout=5,connect_timeout=2,ttl_ms=100,"
        "cache_scope=public,allowed_hosts=a.example|b.example,forward_headers=X-Tenant"
    )
    assert spec.path == "/mcp" and spec.upstream == UPSTREAM
    assert spec.transport == "sse" and spec.timeout == 5.0 and spec.connect_timeout == 2.0
    assert spec.ttl_ms == 100 and spec.cache_scope == "public"
    assert spec.allowed_hosts == ["a.example", "b.example"]
    assert spec.forward_headers == ["x-tenant"]


def test_max_message_bounds_every_carrier_or_keeps_their_own() -> None:
    given = RouteSpec.parse(f"/mcp={UPSTREAM},max_message=1048576").upstream_settings()
    assert (given.http_max_message, given.stdio_max_message) == (1 << 20, 1 << 20)
    unset = RouteSpec.parse(f"/mcp={UPSTREAM}").upstream_settings()
    assert (unset.http_max_message, unset.stdio_max_message) == (16 << 20, 32 << 20)
    assert "max_message = '100': Input should be greater than or equal to 1024" in refuse(
        "--route", f"/mcp={UPSTREAM},max_message=100"
    )


def test_serve_flags() -> None:
    data = check(
        "--listen",
        "0.0.0.0:9000",
        "--route",
        f"/a={UPSTREAM}",
        "-r",
        "/b=http://127.0.0.1:3001/sse,transport=sse",
        "--log-format",
        "console",
        "--log-level",
        "DEBUG",
        "--drain-timeout",
        "3",
    )
    assert data["listen"] == "0.0.0.0:9000"
    assert [r["path"] for r in data["routes"]] == ["/a", "/b"]
    assert data["routes"][1]["transport"] == "sse"
    assert (data["log_format"], data["log_level"], data["drain_timeout"]) == ("console", "debug", 3)


def test_defaults() -> None:
    data = check()
    assert data["listen"] == "127.0.0.1:8080" and data["routes"] == []
    assert (data["log_format"], data["log_level"]) == ("auto", "info")


def test_cluster_pool_defaults_are_the_stores_own() -> None:
    from gateway.cluster.store import POOL_SIZE, POOL_TIMEOUT

    data = check()
    assert (data["cluster_pool"], data["cluster_pool_timeout"]) == (POOL_SIZE, POOL_TIMEOUT)
    data = check("--cluster-pool", "7", env={"GATEWAY_CLUSTER_POOL_TIMEOUT": "0.5"})
    assert (data["cluster_pool"], data["cluster_pool_timeout"]) == (7, 0.5)
    assert "cluster_pool = 0" in refuse("--cluster-pool", "0")


# ------------------------------------------------------------- precedence


def test_flag_over_env_over_file(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        f"""
listen = "127.0.0.1:1111"
log_level = "error"
drain_timeout = 7
session_idle_timeout = 60

[[routes]]
path = "/file"
upstream = "{UPSTREAM}"
""",
    )
    env = {"GATEWAY_LISTEN": "127.0.0.1:2222", "GATEWAY_LOG_LEVEL": "warning"}
    data = check("--config", str(config), "--listen", "127.0.0.1:3333", env=env)
    assert data["listen"] == "127.0.0.1:3333"  # the flag
    assert data["log_level"] == "warning"  # the environment
    assert data["drain_timeout"] == 7 and data["session_idle_timeout"] == 60  # the file
    assert [r["path"] for r in data["routes"]] == ["/file"]
    # The environment's routes replace the file's; the flag's replace both.
    data = check("--config", str(config), env={"GATEWAY_ROUTES": f"/env={UPSTREAM}"})
    assert [r["path"] for r in data["routes"]] == ["/env"]
    data = check(
        "--config",
        str(config),
        "--route",
        f"/flag={UPSTREAM}",
        env={"GATEWAY_ROUTES": f"/env={UPSTREAM}"},
    )
    assert [r["path"] for r in data["routes"]] == ["/flag"]


def test_config_file_from_the_environment(tmp_path: Path) -> None:
    config = write(tmp_path, 'listen = "127.0.0.1:4444"\n')
    assert check(env={"GATEWAY_CONFIG": str(config)})["listen"] == "127.0.0.1:4444"


def test_routes_from_the_environment_as_json_or_specs() -> None:
    routes = [
        {"path": "/a", "upstream": UPSTREAM, "transport": "http", "allowed_hosts": ["x"]},
        f"/b={UPSTREAM},ttl_ms=5",
    ]
    data = check(env={"GATEWAY_ROUTES": json.dumps(routes)})
    assert [r["path"] for r in data["routes"]] == ["/a", "/b"]
    assert data["routes"][0]["allowed_hosts"] == ["x"] and data["routes"][1]["ttl_ms"] == 5
    data = check(env={"GATEWAY_ROUTES": f"/a={UPSTREAM} ; /b={UPSTREAM},transport=sse"})
    assert [(r["path"], r["transport"]) for r in data["routes"]] == [("/a", "auto"), ("/b", "sse")]


def test_the_example_config_loads_and_shows_every_option() -> None:
    settings = load_settings({"config": EXAMPLE})
    assert [r.path for r in settings.routes] == ["/mcp", "/legacy", "/files"]
    assert settings.routes[2].command == [
        "npx",
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/data",
    ]
    assert settings.routes[0].forward_headers == ["x-tenant"]
    text = EXAMPLE.read_text()
    # Cluster mode needs a store and a secret, rate limits a rate: shown commented
    # out.  reuse_port is
    # set by --workers for its children, never by hand.
    optional = ("cluster", "advertise", "rate", "burst", "tool_rate", "tool_burst")
    for name in Settings.model_fields:
        if name not in ("config", "routes", "reuse_port", *optional):
            assert f"\n{name} = " in text, f"{name} is not in the example"
    for name in optional:
        assert f"\n# {name} = " in text, f"{name} is not in the example"
    assert "\n[[routes]]\n" in text
    for name in RouteSpec.model_fields:
        assert f"{name} = " in text or f"routes.{name}]" in text, f"{name} is not in the example"
    check("--config", str(EXAMPLE))


# ------------------------------------------------------------------ secrets


def test_upstream_headers_from_env_and_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "key"
    secret.write_text("file-secret\n")
    config = write(
        tmp_path,
        f"""
[[routes]]
path = "/mcp"
upstream = "{UPSTREAM}"
headers_from_env = {{ Authorization = "UPSTREAM_TOKEN" }}
headers_from_file = {{ "X-Api-Key" = "{secret}" }}
""",
    )
    monkeypatch.setenv("UPSTREAM_TOKEN", "Bearer env-secret")
    settings = load_settings({"config": config})
    assert settings.routes[0].upstream_headers() == {
        "Authorization": "Bearer env-secret",
        "X-Api-Key": "file-secret",
    }
    # Only the names of the secrets are shown, never the values.
    shown = CliRunner().invoke(app, ["serve", "--config", str(config), "--check-config"])
    assert shown.exit_code == 0 and "env-secret" not in shown.output
    monkeypatch.delenv("UPSTREAM_TOKEN")
    line = refuse("--config", str(config))
    assert "UPSTREAM_TOKEN is not set" in line


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("args", "env", "fragment"),
    [
        (["--route", "mcp"], None, "expected PATH=UPSTREAM"),
        (["--route", "/mcp=ftp://x"], None, "must be an http(s):// URL"),
        (["--route", f"/mcp={UPSTREAM},transport=tcp"], None, "transport = 'tcp'"),
        (["--route", f"/mcp={UPSTREAM},colour=red"], None, "unknown option 'colour'"),
        (["--route", f"/mcp={UPSTREAM},timeout=soon"], None, "timeout = 'soon'"),
        (["--route", f"/mcp={UPSTREAM},version=1999"], None, "unknown revision '1999'"),
        (
            ["--route", f"/mcp={UPSTREAM},version=2026-07-28,transport=sse"],
            None,
            "transport=sse is the handshake era's",
        ),
        (["--route", f"/mcp={UPSTREAM},transport=stdio"], None, "needs a stdio:COMMAND"),
        (["--route", f"/a={UPSTREAM}", "--route", f"/a={UPSTREAM}"], None, "share the path /a"),
        (["--listen", "nowhere"], None, "listen = 'nowhere'"),
        (["--log-level", "loud"], None, "--log-level"),
        (["--log-format", "xml"], None, "--log-format"),
        (["--drain-timeout", "-1"], None, "drain_timeout = -1.0"),
        (["--bogus"], None, "No such option: --bogus"),
        ([], {"GATEWAY_ROUTES": "[not json"}, "not a JSON list"),
        ([], {"GATEWAY_MAX_BODY_BYTES": "lots"}, "max_body_bytes = 'lots'"),
        ([], {"GATEWAY_LOG_FORMAT": "xml"}, "log_format = 'xml'"),
    ],
)
def test_bad_flags_and_env(args: list[str], env: dict[str, str] | None, fragment: str) -> None:
    assert fragment in refuse(*args, env=env)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('lisen = "127.0.0.1:1"', "lisen: unknown setting"),
        ('listen = "x"', "listen = 'x'"),
        ("drain_timeout = 'long'", "drain_timeout = 'long'"),
        ("[[routes]]\npath = '/a'", "routes.0.upstream: required"),
        (f"[[routes]]\npath = 'a'\nupstream = '{UPSTREAM}'", "routes.0.path = 'a'"),
        (f"[[routes]]\npath = '/a'\nupstream = '{UPSTREAM}'\nttl_ms = -5", "routes.0.ttl_ms = -5"),
        (
            f"[[routes]]\npath = '/a'\nupstream = '{UPSTREAM}'\nheaders = {{ A = 'b' }}",
            "routes.0.headers: unknown setting",
        ),
        ("listen = ", "not valid TOML"),
    ],
)
def test_bad_config_file(tmp_path: Path, text: str, fragment: str) -> None:
    config = write(tmp_path, text)
    line = refuse("--config", str(config))
    assert fragment in line, line
    if "TOML" not in fragment:
        assert str(config) in line


def test_missing_config_file(tmp_path: Path) -> None:
    assert "not found" in refuse("--config", str(tmp_path / "nope.toml"))


def test_load_settings_raises_one_line(tmp_path: Path) -> None:
    config = write(tmp_path, 'listen = "x"\nlog_level = "loud"\n')
    with pytest.raises(SettingsError) as caught:
        load_settings({"config": config})
    message = str(caught.value)
    assert "\n" not in message and "listen = 'x'" in message and "log_level = 'loud'" in message


def test_a_real_process_reports_one_line_and_exit_code_2(tmp_path: Path) -> None:
    config = write(tmp_path, 'listen = "127.0.0.1:1"\nbogus = 1\n')
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"Error: invalid settings (config file {config}): bogus: unknown setting"
    ]


def test_a_taken_port_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "gateway",
                "serve",
                "--listen",
                f"127.0.0.1:{port}",
                "--route",
                f"/mcp={UPSTREAM}",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin"},
        )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert (
        done.stderr.strip().splitlines()[-1].startswith(f"Error: cannot listen on 127.0.0.1:{port}")
    )


# ------------------------------------------------------------------ other commands


def test_version_and_help() -> None:
    from gateway import __version__

    runner = CliRunner()
    assert runner.invoke(app, ["version"]).stdout.strip() == __version__
    top = runner.invoke(app, ["--help"])
    assert top.exit_code == 0
    for command in ("serve", "probe", "version"):
        assert command in top.stdout
    serve = runner.invoke(app, ["serve", "--help"])
    assert serve.exit_code == 0 and "--check-config" in serve.stdout  # issue 39: not hidden
    for option in ("--route", "--listen", "--config", "--log-format", "--log-level"):
        assert option in serve.stdout
    probe = runner.invoke(app, ["probe", "-h"])
    assert probe.exit_code == 0 and "--json" in probe.stdout and "--transport" in probe.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["probe", "ftp://x"], "must be an http(s):// URL"),
        (["probe", UPSTREAM, "--transport", "tcp"], "--transport"),
        (["probe", UPSTREAM, "--version", "1999"], "unknown revision '1999'"),
        (["probe", UPSTREAM, "-H", "Authorization"], "expected NAME=ENV_VAR"),
        # NAME:ENV_VAR, as the route option writes it, is read the same way.
        (["probe", UPSTREAM, "-H", "Authorization:NO_SUCH_VAR_X"], "NO_SUCH_VAR_X is not set"),
        # A URL's user info is an Authorization of its own: not both (every request failed).
        (
            ["probe", "http://u:p@h:1/mcp", "-H", "Authorization=PATH"],
            "sends its own Authorization",
        ),
        (["probe", UPSTREAM, "--version", "2026-07-28", "--transport", "sse"], "handshake era's"),
        (["probe"], "Missing argument 'UPSTREAM'"),
    ],
)
def test_bad_probe_input(args: list[str], fragment: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and fragment in errors[0], result.stderr


def test_probe_of_nothing_fails_cleanly() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        result = CliRunner().invoke(
            app, ["probe", f"http://127.0.0.1:{port}/mcp", "--timeout", "5"]
        )
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"Error: probe of http://127.0.0.1:{port}/mcp failed")
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_state_key_comes_from_the_environment_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.process.start_options import STATE_KEY_ENV, state_key_from_env

    monkeypatch.delenv(STATE_KEY_ENV, raising=False)
    assert state_key_from_env() is None
    monkeypatch.setenv(STATE_KEY_ENV, "k" * 40)
    assert state_key_from_env() == b"k" * 40
    monkeypatch.setenv(STATE_KEY_ENV, "short")
    with pytest.raises(SettingsError, match="at least 32"):
        state_key_from_env()
    # The config file has no place for it: a secret never lives there.
    assert "state_key" not in Settings.model_fields


# ------------------------------------------------------------------ reaching the code


async def test_time_and_quota_settings_reach_each_route(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ask settle window and the parked-call quota set in the environment are the
    ones the route's forwarder uses (not the built-in defaults)."""
    from gateway.process.app import Gateway

    monkeypatch.setenv("GATEWAY_ASK_SETTLE", "0.25")
    monkeypatch.setenv("GATEWAY_MAX_PARKED_PER_PRINCIPAL", "7")
    settings = load_settings({"routes": [f"/mcp={UPSTREAM}"]})
    gateway = Gateway.from_settings(settings)
    await gateway.build()
    try:
        (endpoint,) = gateway.endpoints
        forwarder = endpoint.route.backend.forwarder
        assert forwarder.ask_settle == 0.25
        assert forwarder.parking.per_principal == 7
    finally:
        await gateway.stop(0)
