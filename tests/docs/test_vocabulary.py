"""One vocabulary (issue 49, item 6): every command-line flag the docs name in
backticks is a flag of a `gateway` command (docs/console.md named `--console-calls`,
which `serve` refuses)."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main

from gateway.config.route_options import OPTIONS
from gateway.process.cli import app

REPO = Path(__file__).resolve().parents[2]
# Pages about other programs' flags (the benches: docs/performance.md, bench/README.md).
OTHER_PROGRAMS = {"performance.md"}
# Flags the docs quote as examples of something else (a stdio server's own option).
NOT_OURS = {"--api-key"}
FLAG = re.compile(r"`(--[a-z][a-z0-9-]*)")


def gateway_flags() -> set[str]:
    group = typer.main.get_command(app)
    commands = getattr(group, "commands", {}).values()
    return {
        opt
        for command in [group, *commands]
        for param in command.params
        for opt in [*param.opts, *param.secondary_opts]
        if opt.startswith("--")
    }


def test_every_flag_the_docs_name_exists() -> None:
    known = gateway_flags()
    assert {"--route", "--cluster", "--console-bodies", "--check-config"} <= known
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    unknown = {
        f"{page.relative_to(REPO)}: {flag}"
        for page in pages
        if page.name not in OTHER_PROGRAMS
        for flag in FLAG.findall(page.read_text())
        if flag not in known and flag not in NOT_OURS
    }
    assert unknown == set()


# What `name=` in backticks is when it is no route option: a pip pin, a challenge's
# parameter.
NOT_ROUTE_OPTIONS = {"mcp", "error"}
ROUTE_OPTION = re.compile(r"`([a-z_]+)=")


def test_every_route_option_the_docs_name_exists() -> None:
    known = {option.name for option in OPTIONS}
    assert {"also", "env", "cwd", "headers_from_env"} <= known
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    unknown = {
        f"{page.relative_to(REPO)}: {name}="
        for page in pages
        for name in ROUTE_OPTION.findall(page.read_text())
        if name not in known and name not in NOT_ROUTE_OPTIONS
    }
    assert unknown == set()
