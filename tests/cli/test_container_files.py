"""The Dockerfile and compose.yaml, checked without Docker: the command lines they
run go through the real CLI parser (`serve --check-config`), and the compose
file's placeholder legacy server really is an MCP server the gateway can use."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gateway.process.cli import app

REPO = Path(__file__).resolve().parents[2]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    lines: list[tuple[str, str]] = []
    pending = ""
    for raw in (REPO / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        instruction, _, rest = line.partition(" ")
        lines.append((instruction.upper(), rest.strip()))
    return lines


def exec_form(instruction: str) -> list[str]:
    values = [rest for name, rest in dockerfile_instructions() if name == instruction]
    assert values, f"no {instruction} in the Dockerfile"
    parsed = json.loads(values[-1])  # the last one wins, as in Docker
    assert isinstance(parsed, list) and all(isinstance(v, str) for v in parsed)
    return parsed


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "compose.yaml").read_text())
    return data


def check_config(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """`gateway ARGS --check-config` as the container runs it: the effective settings."""
    assert argv[0] == "gateway", argv
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    result = CliRunner().invoke(app, [*argv[1:], "--check-config"], env={**clean, **(env or {})})
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_dockerfile_is_multi_stage_slim_and_non_root() -> None:
    instructions = dockerfile_instructions()
    bases = [rest for name, rest in instructions if name == "FROM"]
    assert len(bases) >= 2 and all(b.startswith("python:3.11-slim") for b in bases)
    users = [rest for name, rest in instructions if name == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    healthcheck = next(rest for name, rest in instructions if name == "HEALTHCHECK")
    assert "/readyz" in (REPO / "Dockerfile").read_text() and "urllib" in healthcheck
    assert "curl" not in healthcheck


def test_dockerfile_entrypoint_and_cmd_parse() -> None:
    entrypoint, cmd = exec_form("ENTRYPOINT"), exec_form("CMD")
    assert entrypoint == ["gateway", "serve"]
    data = check_config([*entrypoint, *cmd])
    assert data["listen"] == "0.0.0.0:8080"
    # Configurable by environment: routes and logging from GATEWAY_* variables.
    env = {"GATEWAY_ROUTES": "/mcp=http://legacy:3000/mcp", "GATEWAY_LOG_LEVEL": "debug"}
    data = check_config([*entrypoint, *cmd], env)
    assert [r["upstream"] for r in data["routes"]] == ["http://legacy:3000/mcp"]
    assert data["log_level"] == "debug"
    # A `docker run IMAGE --listen ... --route ...` replaces CMD.
    data = check_config([*entrypoint, "--listen", "0.0.0.0:9090", "--route", "/x=http://y/mcp"])
    assert data["listen"] == "0.0.0.0:9090"


def test_compose_gateway_command_parses() -> None:
    services = compose()["services"]
    gateway, legacy = services["gateway"], services["legacy"]
    command = gateway["command"]
    argv = shlex.split(command) if isinstance(command, str) else [str(c) for c in command]
    env = {k: str(v) for k, v in (gateway.get("environment") or {}).items()}
    data = check_config([*exec_form("ENTRYPOINT"), *argv], env)
    assert data["listen"].endswith(":8080")
    (route,) = data["routes"]
    assert route["path"] == "/mcp"
    assert route["upstream"].startswith("http://legacy:")  # the sidecar's neighbour
    assert "legacy" in gateway["depends_on"]
    assert legacy["image"].startswith("python:")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_placeholder_legacy_server_works_behind_the_gateway() -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, str(REPO / "config" / "legacy-server" / "server.py")],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:  # bounded wait for the port
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the placeholder legacy server did not start")
            time.sleep(0.05)
        done = subprocess.run(
            [sys.executable, "-m", "gateway", "probe", f"http://127.0.0.1:{port}/mcp", "--json"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["era"] == "legacy" and report["counts"]["tools"] == 1
    finally:
        server.terminate()
        server.wait(10)
