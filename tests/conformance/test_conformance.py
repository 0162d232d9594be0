"""The official MCP conformance suite's server scenarios, direct and through the gateway.

One test per (lane, scenario) for every scenario the upstream server passes directly
(the control): the direct lane must keep passing it, and so must the gateway lane in
front of the same server.  Where the gateway fails one today the test is a strict
xfail whose reason names the failing checks, so the list stays visible and a fix
turns it into an XPASS that must be acknowledged here.

Scenarios the upstream server fails directly say nothing about the gateway and are
not applicable (mostly: the pinned SDK peers do not register the suite's fixture
tools, resources and prompts such as `test_image_content`).  They are listed in
NOT_APPLICABLE and checked, as one test per kind, to still fail directly: a change of
the suite or of a peer that makes one pass shows up there.  The exception is
PARTIAL: scenarios the server fails directly on a few checks but passes on most,
where the gateway lane must not fail any check that passes directly.

`scripts/conformance` prints the whole scenario x lane table.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.run import KINDS, LANES, Lane, missing, regressions, run_all

pytestmark = [pytest.mark.interop, pytest.mark.timeout(400)]

# Scenarios each kind's upstream passes directly (as measured with the pinned suite).
DIRECT_PASS: dict[str, tuple[str, ...]] = {
    "legacy": (
        "completion-complete",
        "logging-set-level",
        "ping",
        "prompts-list",
        "resources-list",
        "server-initialize",
        "server-session-lifecycle",
        "server-sse-multiple-streams",
        "tools-call-error",
        "tools-call-simple-text",
        "tools-list",
    ),
    "modern": (
        "caching",
        "completion-complete",
        "dns-rebinding-protection",
        "http-header-validation",
        "input-required-result-ignore-extra-params",
        "input-required-result-missing-input-response",
        "input-required-result-unsupported-methods",
        "input-required-result-validate-input",
        "prompts-list",
        "resources-list",
        "sep-2164-resource-not-found",
        "server-sse-multiple-streams",
        "tools-call-error",
        "tools-call-simple-text",
        "tools-list",
    ),
}

# Failed directly on a few checks only (server-stateless: 25 of 28 checks pass; the
# peer lacks the suite's `test_missing_capability` diagnostic tool).
PARTIAL: dict[str, tuple[str, ...]] = {"legacy": (), "modern": ("server-stateless",)}

# Failed directly: not applicable to the gateway.  Why, in the main: the peer lacks
# the suite's fixture tool/resource/prompt (test_image_content, test://static-text,
# test_simple_prompt, json_schema_2020_12_tool, an x-mcp-header tool ...); the legacy
# peer has no DNS-rebinding protection, no resource subscriptions, and no SSE
# priming events; the modern peer answers complete results where the suite's
# input-required scenarios drive its fixture tools into InputRequiredResult.
NOT_APPLICABLE: dict[str, tuple[str, ...]] = {
    "legacy": (
        "dns-rebinding-protection",
        "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums",
        "json-schema-2020-12",
        "prompts-get-embedded-resource",
        "prompts-get-simple",
        "prompts-get-with-args",
        "prompts-get-with-image",
        "resources-read-binary",
        "resources-read-text",
        "resources-subscribe",
        "resources-templates-read",
        "resources-unsubscribe",
        "server-sse-polling",
        "tools-call-audio",
        "tools-call-elicitation",
        "tools-call-embedded-resource",
        "tools-call-image",
        "tools-call-mixed-content",
        "tools-call-sampling",
        "tools-call-with-logging",
        "tools-call-with-progress",
    ),
    "modern": (
        "http-custom-header-server-validation",
        "input-required-result-basic-elicitation",
        "input-required-result-basic-list-roots",
        "input-required-result-basic-sampling",
        "input-required-result-capability-check",
        "input-required-result-multi-round",
        "input-required-result-multiple-input-requests",
        "input-required-result-non-tool-request",
        "input-required-result-request-state",
        "input-required-result-result-type",
        "input-required-result-tampered-state",
        "json-schema-2020-12",
        "prompts-get-embedded-resource",
        "prompts-get-simple",
        "prompts-get-with-args",
        "prompts-get-with-image",
        "resources-read-binary",
        "resources-read-text",
        "resources-templates-read",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-image",
        "tools-call-mixed-content",
        "tools-call-with-progress",
    ),
}

# Gateway lanes that fail today: (lane, scenario) -> what fails (for the issue list).
GATEWAY_XFAIL: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="module")
def lanes() -> Iterator[dict[str, Lane]]:
    reason = missing()
    if reason:
        pytest.fail(f"conformance suite not installed: {reason}", pytrace=False)
    yield run_all()


def _cases() -> Iterator[object]:
    for lane in LANES:
        kind = lane.split("-")[0]
        for scenario in DIRECT_PASS[kind] + PARTIAL[kind]:
            reason = GATEWAY_XFAIL.get((lane, scenario))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(lane, scenario, id=f"{lane}:{scenario}", marks=marks)


@pytest.mark.parametrize(("lane", "scenario"), list(_cases()))
def test_scenario(lanes: dict[str, Lane], lane: str, scenario: str) -> None:
    kind = lane.split("-")[0]
    ran = lanes[lane]
    assert not ran.error, ran.error
    direct = lanes[f"{kind}-direct"].scenarios.get(scenario)
    assert direct is not None, f"{scenario} did not run directly against {ran.upstream}"
    if lane.endswith("-direct"):
        if scenario in PARTIAL[kind]:
            assert direct.verdicts > len(direct.failures), direct.summary()
        else:
            assert direct.passed, f"{ran.upstream} no longer passes it: {direct.summary()}"
        return
    lost = regressions(direct, ran.scenarios.get(scenario))
    assert not lost, "passes directly, fails via the gateway: " + "; ".join(lost)
    if scenario not in PARTIAL[kind]:
        assert ran.scenarios[scenario].passed, ran.scenarios[scenario].summary()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_not_applicable_still_fail_directly(lanes: dict[str, Lane], kind: str) -> None:
    """Informational: which scenarios the direct server fails (so the gateway is not
    judged on them), and that the lists above still describe the suite and the peer."""
    direct = lanes[f"{kind}-direct"].scenarios
    passing = {name for name, s in direct.items() if s.passed}
    assert passing == set(DIRECT_PASS[kind]), (
        f"newly passing directly: {sorted(passing - set(DIRECT_PASS[kind]))}; "
        f"no longer passing: {sorted(set(DIRECT_PASS[kind]) - passing)}"
    )
    recorded = set(DIRECT_PASS[kind]) | set(PARTIAL[kind]) | set(NOT_APPLICABLE[kind])
    assert set(direct) == recorded, (
        f"scenarios not recorded here: {sorted(set(direct) - recorded)}; "
        f"recorded but not run: {sorted(recorded - set(direct))}"
    )


@pytest.mark.parametrize("lane", [lane for lane in LANES if lane.endswith("via-gateway")])
def test_gateway_exits_cleanly(lanes: dict[str, Lane], lane: str) -> None:
    """After the whole suite, the gateway exits 0 on SIGTERM and logged no error."""
    assert not lanes[lane].gateway_log_errors, "\n".join(lanes[lane].gateway_log_errors)
