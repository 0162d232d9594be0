"""The console in a real browser (Debian's chromium through Playwright), in front
of the bundled demo server, with screenshots of each page for docs/console/."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import wait_port
from tests.console.conftest import SHOTS, TOKEN, console_port
from tests.e2e.gateway_proc import REPO, RunningGateway, free_port, gateway

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


def open_session(running: RunningGateway, revision: str) -> None:
    """A handshake-era client's session, opened with a plain initialize (left open)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": revision,
            "capabilities": {},
            "clientInfo": {"name": "console-test", "version": "1"},
        },
    }
    request = urllib.request.Request(
        running.url("/mcp"),
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200 and response.headers["Mcp-Session-Id"]


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
    # A client session opened now shows under its revision, live (no reload).
    open_session(running, "2025-06-18")
    page.locator('tr[data-route="/mcp"]', has_text="2025-06-18: 1").wait_for(timeout=WAIT_MS)
    assert "Calls" in page.content() and page.locator("td.num").first.inner_text() != "0"
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
    # Filters: by client revision and by outcome (the page's own form).
    page.select_option("select[name=outcome]", "ok")
    page.click("text=Filter")
    page.locator("tr.call", has_text="echo").wait_for(timeout=WAIT_MS)
    page.goto(console + "/calls?revision=2024-11-05")
    page.locator("p.empty").wait_for(timeout=WAIT_MS)
    page.goto(console + "/calls?route=/mcp&revision=2025-11-25")
    call = page.locator("tr.call", has_text="echo")
    call.wait_for(timeout=WAIT_MS)
    call.locator("a").first.click()
    wires = page.locator(".wire pre")
    wires.first.wait_for(timeout=WAIT_MS)
    sent, upstream_got = wires.nth(0).inner_text(), wires.nth(1).inner_text()
    got, upstream_sent = wires.nth(2).inner_text(), wires.nth(3).inner_text()
    assert '"name": "echo"' in sent and "from the sdk" in sent
    assert "from the sdk" in got and '"jsonrpc": "2.0"' in got
    # The other side: what the gateway sent the demo server, and its answer.
    assert '"method": "tools/call"' in upstream_got and "from the sdk" in upstream_got
    assert "from the sdk" in upstream_sent and '"result"' in upstream_sent
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
    assert page.locator(".wire pre", has_text="not recorded").count() == 4
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


@pytest.mark.console_args("--console-bodies")
@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25", "2025-03-26", "2024-11-05"])
def test_the_playground_calls_greet_me_and_answers_its_elicitation(
    demo_console: tuple[RunningGateway, str], browser: Any, revision: str
) -> None:
    _, console = demo_console
    page = page_for(browser)
    page.goto(console + "/playground")
    page.select_option("select[name=route]", "/mcp")
    page.select_option("select[name=revision]", revision)
    page.click("text=List tools, resources and prompts")
    tool = page.locator("form.item", has_text="greet_me")
    tool.wait_for(timeout=WAIT_MS)
    assert page.locator("form.item", has_text="echo").count() == 1
    tool.locator("button").click()
    question = page.locator("form.question")
    question.wait_for(timeout=WAIT_MS)
    assert "What is your name?" in question.inner_text()
    question.locator("input[type=text]").first.fill("Ada")
    shot(page, f"playground-asked-{revision}")
    question.locator("button[value=accept]").click()
    result = page.locator(".result-text", has_text="Hello, Ada")
    result.wait_for(timeout=WAIT_MS)
    wire = page.locator(".wire").first.inner_text()
    # Each revision's own way: asked on the stream, input_required, or (before
    # elicitation) a tool result answered in the call's reserved arguments.
    assert any(way in wire for way in ("elicitation/create", "input_required", "_mcp_answers"))
    assert "Hello, Ada" in wire
    # The call went through the route: its recent calls have it, from this revision.
    gateway_side = page.locator(".wire", has_text=f"{revision} client -> 2025-11-25 upstream, ok")
    gateway_side.wait_for(timeout=WAIT_MS)
    # ... and the upstream side of it: the demo server asked its question on its stream.
    assert "elicitation/create" in gateway_side.inner_text()
    shot(page, f"playground-{revision}")


def test_a_playground_post_for_a_route_that_is_not_there_is_a_clear_answer(
    demo_console: tuple[RunningGateway, str], browser: Any
) -> None:
    _, console = demo_console
    page = page_for(browser)
    page.goto(console + "/playground")
    csrf = page.locator('meta[name="console-csrf"]').get_attribute("content")
    for path, form in (
        ("/playground/list", {"route": "/nope", "revision": "2026-07-28"}),
        ("/playground/call", {"route": "/mcp", "revision": "1999-01-01", "method": "tools/call"}),
        (
            "/playground/call",
            {
                "route": "/mcp",
                "method": "tools/call",
                "type:arg:n": "integer",
                "arg:n": "x",
                "revision": "2026-07-28",
            },
        ),
        ("/playground/run/nope/answer", {}),
    ):
        answer = page.request.post(console + path, form=form, headers={"X-Console-CSRF": csrf})
        assert answer.status == 200, (path, answer.status)
        assert "class=failure" in answer.text(), (path, answer.text())


def test_the_routes_page_shows_each_target_and_says_why_one_is_not_ready(
    console_env: None, tmp_path: Path, browser: Any
) -> None:
    """A route with two targets, one of them dead, and a route whose upstream is dead:
    every target with its state, the reason and hint as the start-up line says them
    (not a library's exception text), and when the gateway found the upstream."""
    dead = f"http://127.0.0.1:{free_port()}/mcp"
    port = free_port()
    demo = subprocess.Popen(
        [sys.executable, "-m", "gateway", "demo", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    routes = (f"/two=http://127.0.0.1:{port}/mcp,also={dead}", f"/down={dead}")
    extra = ("--console", "--console-listen", "127.0.0.1:0")
    try:
        wait_port(port, 10.0, demo)
        with gateway(*routes, extra=extra, tmp_path=tmp_path, check=False) as running:
            page = page_for(browser)
            page.goto(f"http://127.0.0.1:{console_port(running)}/routes")
            ejected = page.locator('tr[data-route="/two"] li.target.ejected')
            ejected.wait_for(timeout=WAIT_MS)
            said = ejected.inner_text()
            assert "nothing is listening at 127.0.0.1" in said and "next try in" in said, said
            assert page.locator('tr[data-route="/two"] li.target.up').count() == 1
            down = page.locator('tr[data-route="/down"] td.health')
            down.wait_for(timeout=WAIT_MS)
            text = down.inner_text()
            assert "not ready" in text and "start the server" in text, text
            assert "Error" not in text and "Connect call failed" not in text, text
            found = page.locator('tr[data-route="/two"] td.found').inner_text()
            assert found.startswith("20"), found  # a date: when the gateway found it
            shot(page, "routes-targets")
    finally:
        demo.kill()
        demo.wait(5)
