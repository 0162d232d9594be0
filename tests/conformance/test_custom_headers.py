"""The suite's `http-custom-header-server-validation` scenario (SEP-2243 `Mcp-Param-*`
headers) through the gateway.

Neither pinned peer lists a tool with an `x-mcp-header` annotation, so the main
conformance lanes cannot exercise it; here the upstream is a small stateless-era
server that does (tests/e2e/test_param_headers.py) and checks no header itself:
every check the scenario makes is the gateway's own.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.conformance.run import CLI, NODE, SCENARIO_TIMEOUT_MS, missing, parse_results
from tests.e2e.gateway_proc import gateway
from tests.e2e.test_param_headers import modern_upstream

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

SCENARIO = "http-custom-header-server-validation"


async def test_custom_header_validation_via_the_gateway(tmp_path: Path) -> None:
    reason = missing()
    if reason:
        pytest.fail(f"conformance suite not installed: {reason}", pytrace=False)
    runner, url = await modern_upstream([])
    try:
        with gateway(f"/mcp={url}", tmp_path=tmp_path) as gw:
            out = tmp_path / "results"
            out.mkdir()
            argv = [str(NODE), str(CLI), "server", "--url", gw.url("/mcp")]
            argv += ["--scenario", SCENARIO, "--spec-version", "2026-07-28"]
            argv += ["--timeout", str(SCENARIO_TIMEOUT_MS), "--output-dir", str(out)]
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=out,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            output, _ = await asyncio.wait_for(proc.communicate(), 90)
    finally:
        await runner.cleanup()
    scenario = parse_results(out).get(SCENARIO)
    assert scenario is not None, output.decode(errors="replace")[-2000:]
    assert scenario.passed, scenario.summary(10)
    ids = {check.id for check in scenario.checks if check.status == "SUCCESS"}
    assert {
        "sep-2243-server-decode-base64",
        "sep-2243-server-reject-invalid-param-chars",
        "sep-2243-server-validate-param-match",
        "sep-2243-server-reject-param-mismatch",
    } <= ids, sorted(ids)
