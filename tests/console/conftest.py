"""The console's tests: the gateway in its own process with ``--console``, and
Debian's chromium driven by Playwright (``executable_path``: no browser download)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.gateway_proc import RunningGateway, gateway

CHROMIUM = "/usr/bin/chromium"
TOKEN = "console-test-token-0123456789"
# Screenshots of each page: into docs/console with GATEWAY_CONSOLE_SHOTS=docs/console
# (how the docs' pictures are made), else into the temporary directory.
SHOTS = Path(os.environ.get("GATEWAY_CONSOLE_SHOTS") or Path(tempfile.gettempdir(), "console"))
_CONSOLE_PORT = re.compile(r'"port": (\d+)[^\n]*"event": "console listening"')


def console_port(running: RunningGateway, within: float = 20.0) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        match = _CONSOLE_PORT.search(running.log())
        if match is not None:
            return int(match.group(1))
        time.sleep(0.05)  # polling the log, bounded by the deadline
    raise TimeoutError(f"the console did not say its port:\n{running.log()[-3000:]}")


@pytest.fixture
def console_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_CONSOLE_TOKEN", TOKEN)


@pytest.fixture
def demo_console(
    console_env: None, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[RunningGateway, str]]:
    """``gateway serve`` with no route (the bundled demo) and the console on."""
    marker = request.node.get_closest_marker("console_args")
    extra = ("--console", "--console-listen", "127.0.0.1:0", *(marker.args if marker else ()))
    with gateway(extra=extra, tmp_path=tmp_path) as running:
        yield running, f"http://127.0.0.1:{console_port(running)}"


# Per module: Playwright's sync API keeps an event loop running while it is open,
# which the asyncio tests of other modules cannot share.
@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is not installed (scripts/test installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()
