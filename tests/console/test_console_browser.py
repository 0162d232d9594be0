"""The console in a real browser (Debian's chromium through Playwright), in front
of the bundled demo server, with screenshots of each page for docs/console/."""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.console.conftest import SHOTS, TOKEN
from tests.e2e.gateway_proc import REPO, RunningGateway

SDK_PYTHON = REPO / ".peers" / "py-1.30.0" / "bin" / "python"
WAIT_MS = 15_000


def page_for(browser: Any, token: str = TOKEN) -> Any:
    context = browser.new_context(
        http_credentials={"username": "operator", "password": token},
        viewport={"width": 1400, "height": 700},
    )
    return context.new_page()


def sdk_call(running: RunningGateway) -> str:
    """A 2025-11-25 client's tools/call through the gateway (the pinned Python SDK)."""
    if not SDK_PYTHON.exists():
        pytest.fail(f"{SDK_PYTHON} is missing (tests/interop/peers/install installs it)")
    done = subprocess.run(
        [str(SDK_PYTHON), str(Path(__file__).with_name("sdk_call.py")), running.url("/mcp")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_routes_page_lists_the_demo_route_with_its_revision(
    demo_console: tuple[RunningGateway, str], browser: Any
) -> None:
    running, console = demo_console
    sdk_call(running)  # the upstream's revision is found by the first call
    page = page_for(browser)
    page.goto(console + "/routes")
    row = page.locator('tr[data-route="/mcp"]')
    row.wait_for(timeout=WAIT_MS)
    assert "127.0.0.1" in row.inner_text()
    # Refreshed live: the revision cell reads what the gateway found.
    page.locator('tr[data-route="/mcp"] td.revision', has_text="2025-11-25").wait_for(
        timeout=WAIT_MS
    )
    assert "2025-11-25: 1" in row.inner_text() or "2025-11-25" in row.inner_text()
    shot(page, "routes")


@pytest.mark.console_args("--console-bodies")
def test_an_sdk_call_shows_in_recent_calls_with_both_wires(
    demo_console: tuple[RunningGateway, str], browser: Any
) -> None:
    running, console = demo_console
    assert "from the sdk" in sdk_call(running)
    page = page_for(browser)
    page.goto(console + "/calls")
    call = page.locator("tr.call", has_text="echo")
    call.wait_for(timeout=WAIT_MS)
    assert "2025-11-25 → 2025-11-25" in call.inner_text()
    shot(page, "recent-calls")
    call.locator("a").first.click()
    wires = page.locator(".wire pre")
    wires.first.wait_for(timeout=WAIT_MS)
    sent, got = wires.nth(0).inner_text(), wires.nth(1).inner_text()
    assert '"name": "echo"' in sent and "from the sdk" in sent
    assert "from the sdk" in got and '"jsonrpc": "2.0"' in got
    shot(page, "call")


def test_without_body_recording_no_body_is_stored(
    demo_console: tuple[RunningGateway, str], browser: Any
) -> None:
    running, console = demo_console
    sdk_call(running)
    page = page_for(browser)
    page.goto(console + "/calls")
    page.locator("tr.call", has_text="echo").locator("a").first.click()
    page.locator(".wire pre").first.wait_for(timeout=WAIT_MS)
    assert page.locator(".wire pre", has_text="not recorded").count() == 2
    assert "from the sdk" not in page.content()


def test_without_the_token_401_and_nothing_else(
    demo_console: tuple[RunningGateway, str], browser: Any
) -> None:
    _, console = demo_console
    for token in (None, "wrong-token-wrong-token"):
        request = urllib.request.Request(console + "/routes")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 401
        assert refused.value.read() == b""
    # The browser with a wrong password: the same 401, an empty body.
    page = page_for(browser, token="wrong-token-wrong-token")
    response = page.request.get(console + "/routes")
    assert response.status == 401 and response.body() == b""


def test_a_post_without_the_csrf_token_is_refused(
    demo_console: tuple[RunningGateway, str],
) -> None:
    _, console = demo_console
    request = urllib.request.Request(
        console + "/calls/clear", method="POST", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403
