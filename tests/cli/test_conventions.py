"""CLI conventions (issue 39): --version, shell completion, a bare port for --listen,
the log format chosen by whether the output is a terminal, figures a person reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from gateway import __version__

REPO = Path(__file__).resolve().parents[2]


def gateway(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "gateway", *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_version_flag() -> None:
    done = gateway("--version")
    assert (done.returncode, done.stdout.strip()) == (0, __version__)


def test_shell_completion_is_offered() -> None:
    """The console script completes its commands (what --install-completion wires up)."""
    script = Path(sys.executable).with_name("gateway")
    env = {**os.environ, "_GATEWAY_COMPLETE": "complete_bash", "COMP_WORDS": "gateway se"}
    env["COMP_CWORD"] = "1"
    done = subprocess.run([script], capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout.split()) == (0, ["serve"]), done.stderr
    listed = gateway("--help")
    assert "--install-completion" in listed.stdout


def test_a_bare_port_listens_on_loopback() -> None:
    done = gateway("serve", "--listen", "19212", "--check-config")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["listen"] == "127.0.0.1:19212"


def test_logs_into_a_pipe_are_json_without_colour_codes() -> None:
    """A gateway whose stderr is a pipe: JSON lines by default, and no escape codes
    even when console lines are asked for; the drain timeout as a person writes it."""
    for extra, is_json in (((), True), (("--log-format", "console"), False)):
        argv = [sys.executable, "-m", "gateway", "serve", "--listen", "0", *extra]
        process = subprocess.Popen(argv, cwd=REPO, stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        guard = threading.Timer(60, process.kill)  # bounds the reads below
        guard.start()
        try:
            first = process.stderr.readline()
            line = first
            while line and "route ready" not in line:  # logged once signals are handled
                line = process.stderr.readline()
        finally:
            process.terminate()
            guard.cancel()
            rest = process.communicate(timeout=30)[1]
        assert "\x1b[" not in first + rest
        assert first.startswith("{") is is_json, first
        assert "drain_timeout" in rest and "29.999" not in rest, rest


def test_check_is_in_the_help() -> None:
    listed = gateway("--help")
    assert " check " in listed.stdout


def test_probe_timeout_bounds_the_whole_probe() -> None:
    """`gateway probe "stdio:sleep 100" --timeout 2` gives up by itself (it took 10.4 s
    before: the timeout bounded each request, not the probe)."""
    import subprocess
    import sys
    import time

    from tests.e2e.gateway_proc import REPO

    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "probe", "stdio:sleep 100", "--timeout", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "no answer within --timeout 2 s" in done.stderr
    assert time.monotonic() - started < 9  # 2 s and the interpreter's start, not 10+
