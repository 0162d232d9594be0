"""`--workers`' supervisor (gateway/cluster/workers.py) at the moment a signal comes:
a worker that died just before is not started again, and one started while the
signal came is sent it, so the parent never waits for ever on a worker nobody told."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from gateway.cluster import workers

pytestmark = pytest.mark.timeout(60)

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_a_signal_during_the_back_off_starts_nothing_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(30)
    stopping: list[int] = []
    real_sleep = workers.time.sleep

    def sleep(seconds: float) -> None:
        if seconds == workers.RESTART_BACKOFF:
            stopping.append(signal.SIGTERM)  # the signal, while it waits to restart
        real_sleep(min(seconds, 0.01))

    monkeypatch.setattr(workers.time, "sleep", sleep)
    started: list[list[str]] = []
    monkeypatch.setattr(
        workers.subprocess,
        "Popen",
        lambda argv, **_: started.append(argv),  # type: ignore[misc]
    )
    assert workers._supervise([dead], SLEEPER, {}, stopping, set()) == 0
    assert started == []


def test_a_worker_the_signal_missed_is_sent_it() -> None:
    missed = subprocess.Popen(SLEEPER)
    try:
        code = workers._supervise([missed], SLEEPER, {}, [signal.SIGTERM], set())
    finally:
        missed.kill()
    assert code == -signal.SIGTERM
