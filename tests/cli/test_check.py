"""`gateway check` without --reach looks a stdio route's command up, as `serve` would
start it: a command not on PATH, not executable, or a working directory that does not
exist is a problem of the route (exit 1), named with what to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def check(*routes: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "gateway", "check"]
    for route in routes:
        argv += ["--route", route]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)


def test_a_command_not_on_path_fails_the_check() -> None:
    done = check("/t=stdio:no-such-mcp-server-xyz --flag")
    assert done.returncode == 1, done
    assert done.stdout.startswith("FAIL /t  ")
    assert "'no-such-mcp-server-xyz' is not found on PATH" in done.stdout


def test_a_missing_working_directory_fails_the_check(tmp_path: Path) -> None:
    done = check(f"/t=stdio:{sys.executable} -V,cwd={tmp_path / 'gone'}")
    assert done.returncode == 1, done
    assert "does not exist" in done.stdout


def test_a_command_that_can_start_is_valid() -> None:
    done = check(f"/t=stdio:{sys.executable} -V", "/h=http://127.0.0.1:9/mcp")
    assert done.returncode == 0, done
    assert done.stdout.splitlines()[0].startswith("ok   /t  ") and ": valid" in done.stdout
