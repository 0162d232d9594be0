"""The event loop setting: auto (uvloop when installed), asyncio or uvloop."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys

import pytest
from typer.testing import CliRunner

from gateway.config.settings import SettingsError
from gateway.process.cli import app
from gateway.process.lifecycle import loop_factory

HAS_UVLOOP = importlib.util.find_spec("uvloop") is not None


def _serve(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["serve", *args, "--check-config"], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_flag_env_and_default() -> None:
    code, out, _ = _serve()
    assert code == 0 and json.loads(out)["event_loop"] == "auto"
    code, out, _ = _serve("--loop", "ASYNCIO")
    assert code == 0 and json.loads(out)["event_loop"] == "asyncio"
    code, out, _ = _serve(env={"GATEWAY_EVENT_LOOP": "asyncio"})
    assert code == 0 and json.loads(out)["event_loop"] == "asyncio"


def test_an_unknown_loop_is_refused() -> None:
    code, _, err = _serve("--loop", "trio")
    assert code == 2 and "--loop" in err and "Traceback" not in err


def test_asyncio_is_asyncio_and_auto_takes_uvloop_when_installed() -> None:
    assert loop_factory("asyncio") is None
    auto = loop_factory("auto")
    if HAS_UVLOOP:
        assert auto is not None
        loop = auto()
        try:
            assert type(loop).__module__.startswith("uvloop")
        finally:
            loop.close()
    else:
        assert auto is None


def test_uvloop_asked_for_but_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import raises ImportError
    assert loop_factory("auto") is None
    with pytest.raises(SettingsError, match="not installed"):
        loop_factory("uvloop")


def test_uvloop_runs_a_coroutine() -> None:
    factory = loop_factory("uvloop")
    with asyncio.Runner(loop_factory=factory) as runner:
        assert runner.run(asyncio.sleep(0, result=42)) == 42
