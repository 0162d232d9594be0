"""gateway/config/setting_table.py: the one table of gateway-wide settings, and what is
made from it (serve's help, docs/reference/settings.md) or checked against it (the
example config, every GATEWAY_* variable the docs name)."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main

from gateway.config.setting_table import SETTINGS, env_name, help_of, markdown
from gateway.config.settings import Settings
from gateway.process.cli import app

REPO = Path(__file__).resolve().parents[3]
# Variables that are no setting: secrets read from the environment only, the image's
# health check, and the test command's own switches.
NOT_SETTINGS = {
    "GATEWAY_STATE_KEY",
    "GATEWAY_CONSOLE_TOKEN",
    "GATEWAY_HEALTHCHECK_URL",
    "GATEWAY_CONSOLE_SHOTS",
    "GATEWAY_TESTS_ALLOW_MISSING_PEERS",
    "GATEWAY_TESTS_SKIP_CONTAINERS",
}
# Settings the example config does not set: the file itself, its [[routes]] tables,
# and what --workers sets for its children.
NOT_IN_EXAMPLE = {"config", "routes", "reuse_port"}


def test_the_table_and_the_model_name_the_same_settings() -> None:
    assert [s.name for s in SETTINGS] == list(dict.fromkeys(s.name for s in SETTINGS))
    assert {s.name for s in SETTINGS} == set(Settings.model_fields)


def test_the_reference_page_is_current() -> None:
    page = (REPO / "docs" / "reference" / "settings.md").read_text()
    assert page == markdown(), (
        "run: python -m gateway.config.setting_table > docs/reference/settings.md"
    )


def test_each_serve_flag_says_what_the_table_says() -> None:
    serve = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
    helps = {opt: param.help for param in serve.params for opt in param.opts}
    for setting in SETTINGS:
        if setting.flag and setting.name != "routes":
            assert setting.flag in helps, setting.flag
            assert helps[setting.flag] == help_of(setting.name), setting.flag


def test_the_example_config_sets_every_setting_and_names_only_real_ones() -> None:
    text = (REPO / "config" / "gateway.example.toml").read_text()
    for setting in SETTINGS:
        if setting.name not in NOT_IN_EXAMPLE:
            assert re.search(rf"^#? ?{setting.name} = ", text, re.M), setting.name
    envs = {env_name(s) for s in SETTINGS}
    assert set(re.findall(r"GATEWAY_[A-Z_]+", text)) - envs - NOT_SETTINGS == set()
    serve = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
    flags = {opt for param in serve.params for opt in [*param.opts, *param.secondary_opts]}
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", text))
    assert named - flags - {"--max-old-space-size"} == set()  # (a node option, quoted)


def test_every_variable_the_docs_name_is_a_setting() -> None:
    envs = {env_name(s) for s in SETTINGS} | NOT_SETTINGS
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    named = {
        f"{page.relative_to(REPO)}: {name}"
        for page in pages
        for name in re.findall(r"\bGATEWAY_[A-Z_]*[A-Z]\b", page.read_text())
        if name not in envs
    }
    assert named == set()
