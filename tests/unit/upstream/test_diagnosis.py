"""gateway/upstream/diagnosis.py: why an upstream is not usable, said for its operator
(a reason and a hint), the same for `gateway check`, /readyz and the console."""

from __future__ import annotations

from gateway.upstream.diagnosis import diagnose, explained
from gateway.upstream.settings import UpstreamSettings

HTTP = UpstreamSettings(url="http://10.0.0.7:3000/mcp")
REFUSED = "POST http://10.0.0.7:3000/mcp: ConnectionRefusedError: [Errno 111] Connect call failed"


async def test_a_refused_connection_is_said_with_where_and_what_to_do() -> None:
    reason, hint = await diagnose(REFUSED, HTTP)
    assert reason == "nothing is listening at 10.0.0.7:3000"
    assert hint == "start the server, or check the host and port"


async def test_a_command_is_run_again_to_see_why_but_not_for_a_page() -> None:
    settings = UpstreamSettings(url="", command=["sh", "-c", "echo no key >&2; exit 3"])
    reason, _ = await diagnose("the stdio server stopped", settings)
    assert reason == "the command exited with code 3; its last stderr line: no key"
    reason, _ = await diagnose("the stdio server stopped", settings, rerun=False)
    assert "exited with code" not in reason  # not started again to find out


async def test_a_check_keeps_its_error_and_gains_a_reason_and_hint() -> None:
    said = await explained({"ready": False, "error": REFUSED}, HTTP, None)
    assert said["error"] == REFUSED
    assert said["reason"].startswith("nothing is listening") and said["hint"]


async def test_each_target_is_said_on_its_own() -> None:
    other = UpstreamSettings(url="http://10.0.0.8:3000/mcp")
    check = {
        "ready": True,
        "targets": [
            {"target": "a", "state": "up"},
            {"target": "b", "state": "ejected", "reason": REFUSED},
        ],
    }
    said = await explained(check, HTTP, [HTTP, other])
    up, out = said["targets"]
    assert "reason" not in up
    assert out["error"] == REFUSED and out["reason"] == "nothing is listening at 10.0.0.8:3000"


async def test_a_crash_loop_is_said_by_what_the_command_last_wrote() -> None:
    check = {"ready": False, "error": "its command keeps exiting (4 times in a row)"}
    said = await explained({**check, "last_stderr": ["FATAL: no key"]}, HTTP, None)
    assert (
        said["reason"] == check["error"] and said["hint"] == "its last stderr line: FATAL: no key"
    )


async def test_the_routes_own_credentials_refused_are_no_refused_connection() -> None:
    message = (
        "upstream_credentials: the upstream refused the Authorization set by "
        "headers_from_env UPSTREAM_AUTH (HTTP 401)"
    )
    reason, hint = await diagnose(message, HTTP)
    assert reason == "the upstream refused the Authorization set by headers_from_env UPSTREAM_AUTH"
    assert hint == "check the secret in UPSTREAM_AUTH"
