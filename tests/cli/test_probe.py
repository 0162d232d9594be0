"""`gateway probe` against real upstreams of both eras (pinned official SDK servers)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from peers.registry import peer, require_installed, running_server

REPO = Path(__file__).resolve().parents[2]

LEGACY = peer("node-sdk1-server")
# The modern server made strictly modern: it refuses legacy requests.
MODERN = dataclasses.replace(
    peer("node-sdk2-server"),
    extra_args=(*peer("node-sdk2-server").extra_args, "--legacy", "reject"),
)


def probe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "probe", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
    )


def probe_json(*args: str) -> dict[str, Any]:
    done = probe(*args, "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_probe_a_legacy_server() -> None:
    require_installed(LEGACY)
    with running_server(LEGACY, "streamable-http") as url:
        assert isinstance(url, str)
        report = probe_json(url)
        assert report["era"] == "legacy"
        assert report["revision"] == LEGACY.revision
        assert report["transport"] == "http"
        assert report["supported_revisions"][0] == LEGACY.revision
        assert report["server_info"]["name"]
        assert {"tools", "resources", "prompts"} <= set(report["capabilities"])
        counts = report["counts"]
        assert counts["tools"] > 0 and counts["resources"] > 0 and counts["prompts"] > 0
        # The human form says the same.
        done = probe(url)
        assert done.returncode == 0, done.stderr
        assert "era:                 legacy" in done.stdout
        assert f"tools:               {counts['tools']}" in done.stdout


def test_probe_a_legacy_server_over_http_sse() -> None:
    require_installed(LEGACY)
    with running_server(LEGACY, "sse") as url:
        assert isinstance(url, str)
        report = probe_json(url, "--transport", "sse")
        assert report["era"] == "legacy"
        assert report["transport"] == "sse"
        assert report["counts"]["tools"] > 0


def test_probe_a_modern_server() -> None:
    require_installed(MODERN)
    with running_server(MODERN, "streamable-http") as url:
        assert isinstance(url, str)
        report = probe_json(url)
        assert report["era"] == "modern"
        assert report["revision"] == MODERN.revision
        assert report["transport"] == "http"
        assert MODERN.revision in report["supported_revisions"]
        counts = report["counts"]
        assert counts["tools"] > 0 and counts["resources"] > 0 and counts["prompts"] > 0


def test_probe_follows_pagination() -> None:
    """The peer serves resources/list 10 a page, with 25 `demo://many/<i>` resources
    besides its own (tests/interop/peers/CONTRACT.md): a count above 25 means every
    page was followed."""
    require_installed(LEGACY)
    with running_server(LEGACY, "streamable-http") as url:
        assert isinstance(url, str)
        assert probe_json(url)["counts"]["resources"] > 25


def test_probe_pinned_to_a_revision_the_server_does_not_speak_fails_cleanly() -> None:
    require_installed(MODERN)
    with running_server(MODERN, "streamable-http") as url:
        assert isinstance(url, str)
        done = probe(url, "--version", LEGACY.speaks[-1], "--timeout", "10")
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith(f"Error: probe of {url} failed"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
