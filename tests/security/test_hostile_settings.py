"""Hostile settings, generated: route specs and every URL-valued option (ports, IPv6
literals, IDNA, empty and long labels, schemes, user info), header names and values
from flags, the environment and files (arbitrary bytes, CR/LF, NUL).

The property, for every generated configuration: `gateway check` either passes or
exits 2 with one ``Error:`` line (never a traceback), and a configuration `check`
passes is one `serve` builds: the same validation, then every route's upstream links,
sessions and targets made as `serve` makes them before it listens.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gateway.config.settings import load_settings
from gateway.process.app import Gateway
from gateway.process.cli import app

EXAMPLES = 300
RUNNER = CliRunner()
HOSTILE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

any_text = st.text(max_size=12)
label = st.one_of(
    st.sampled_from(["", "a" * 63, "a" * 64, "bücher", "xn--", "-a", "a_b", "127", "localhost"]),
    st.text(st.characters(blacklist_characters=",|=\x00"), max_size=10),
)
host = st.one_of(
    st.lists(label, min_size=1, max_size=4).map(".".join),
    st.sampled_from(["[::1]", "[::1", "::1]", "[fe80::1%25eth0]", "[zz::1]", "127.0.0.1"]),
)
port = st.one_of(
    st.just(""),
    st.integers(-1, 70_000).map(lambda n: f":{n}"),
    st.text("0123456789x:", max_size=7).map(lambda t: f":{t}"),
)
url = st.builds(
    lambda scheme, user, h, p, path, query: f"{scheme}://{user}{h}{p}/{path}{query}",
    st.sampled_from(["http", "https", "HTTP", "ftp", "file", "", "http:"]),
    st.sampled_from(["", "u:pw@", "@", "u@"]),
    host,
    port,
    st.text(st.characters(blacklist_characters=",|"), max_size=6),
    st.sampled_from(["", "?token=t", "?a=1&b", "#frag"]),
)
header_name = st.one_of(
    st.sampled_from(["Authorization", "X-Key", "X Key", "X:Key", "", "Ünï"]),
    st.text(st.characters(blacklist_characters=",|:=\x00"), min_size=1, max_size=8),
)


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _builds(route: str) -> None:
    """What `serve` does with the settings before it listens; raises on any problem."""
    gateway = Gateway.from_settings(load_settings({"routes": [route]}))

    async def build() -> None:
        try:
            await gateway.build()
        finally:
            await gateway.stop()

    asyncio.run(build())


def _judge(route: str) -> None:
    result = RUNNER.invoke(app, ["check", "--route", route])
    said = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        route,
        repr(result.exception),
    )
    assert "Traceback" not in said, said
    assert result.exit_code in (0, 1, 2), (route, result.exit_code, said)
    if result.exit_code == 1:  # valid settings, a stdio command that cannot start
        assert said.startswith("FAIL "), said
        return
    if result.exit_code == 2:
        errors = [line for line in said.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1, said
        return
    _builds(route)  # check passed it: serve must build it too


@HOSTILE
@given(upstream=url, also=st.lists(url, max_size=2), more=st.sampled_from(["", ",timeout=5"]))
def test_route_urls(upstream: str, also: list[str], more: str) -> None:
    route = f"/r={upstream}" + (f",also={'|'.join(also)}" if also else "") + more
    _judge(route)


@HOSTILE
@given(option=st.sampled_from(["public_url", "auth_issuer", "auth_jwks_uri"]), value=url)
def test_auth_urls(option: str, value: str) -> None:
    route = f"/r=http://127.0.0.1:9/mcp,auth=gateway,public_url=http://127.0.0.1/r,auth_issuer=http://127.0.0.1:9,{option}={value}"
    _judge(route)


@HOSTILE
@given(name=header_name, value=st.text(max_size=20))
def test_header_values_from_the_environment(name: str, value: str) -> None:
    with _environment({"HOSTILE_HEADER": value.replace("\x00", "")}):
        _judge(f"/r=http://127.0.0.1:9/mcp,headers_from_env={name}:HOSTILE_HEADER")


@HOSTILE
@given(name=header_name, content=st.binary(max_size=24))
def test_header_values_from_files(name: str, content: bytes, tmp_path: Path) -> None:
    secret = tmp_path / "value"
    secret.write_bytes(content)
    _judge(f"/r=http://127.0.0.1:9/mcp,headers_from_file={name}:{secret}")


@HOSTILE
@given(text=st.text(max_size=60))
def test_any_route_text(text: str) -> None:
    _judge(text.replace("\x00", ""))


OPTION_VALUES = [
    *("stdio", "sse", "http", "auto", "2026-07-28", "2025-11-25", "2024-11-05"),
    *("true", "false", "2", "shared", "per-session", "http://127.0.0.1:9/x"),
]


@HOSTILE
@given(
    options=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "timeout",
                    "also",
                    "instances",
                    "max_message",
                    "health_every",
                    "questions_at_once",
                    "rate",
                    "tools",
                    "redirects",
                    "keepalive",
                    "env",
                    "cwd",
                    "max_connections",
                    "transport",
                    "version",
                    "shared",
                    "roots",
                    "end_sessions",
                ]
            ),
            st.one_of(
                any_text,
                # Values an option takes, so combinations that each pass alone meet.
                st.sampled_from(OPTION_VALUES),
            ),
        ),
        max_size=3,
    ),
    # An HTTP upstream and a stdio one: an option may fit one kind and not the other.
    upstream=st.sampled_from(["http://127.0.0.1:9/mcp", "stdio:true", "http://127.0.0.1:9/sse"]),
)
def test_route_options(options: list[tuple[str, str]], upstream: str) -> None:
    rest = "".join(f",{name}={value.replace(',', '')}" for name, value in options)
    _judge(f"/r={upstream}{rest}")
