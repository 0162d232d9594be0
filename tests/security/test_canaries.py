"""Nothing secret leaves: a unique canary in every input that can carry a secret, every
output channel read through success and failure paths, and no canary found where it
must not be.

Inputs: a route URL's user info and query values (the first target and an ``also=``
one), ``headers_from_env`` and ``headers_from_file`` values, a stdio route's ``env=``
and secret command options, ``GATEWAY_STATE_KEY``, the console token, the
introspection credential, a Redis password in ``--cluster``, a client's
``Authorization`` and ``Cookie``, and tool arguments under secret-looking keys in many
spellings.  Outputs: the start-up lines and every log line at debug, ``check``,
``check --reach``, ``serve --check-config``, ``/``, ``/readyz``, ``/metrics``, a route's
HTML page, every console page and fragment (bodies recorded), client answers (bodies
and headers) in all five revisions, and the exported OpenTelemetry spans.

The canaries may reach the upstream (that is where they are for); the upstream's own
answers are not the gateway's to judge and the tool called (``add``) echoes nothing.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.console.conftest import console_port
from tests.e2e.fake_client import (
    HANDSHAKE_REVISIONS,
    modern_headers,
    modern_request,
    open_session,
    post,
    request,
    session_headers,
)
from tests.e2e.gateway_proc import REPO, HeldPort, RunningGateway, gateway
from tests.e2e.otlp_receiver import Receiver
from tests.security.harness import demo_upstream, modern_upstream


def _canary(name: str) -> str:
    return f"CANARY{name.upper()}{secrets.token_hex(4)}"


C = {
    name: _canary(name)
    for name in (
        "urlpw",
        "urlq",
        "alsopw",
        "alsoq",
        "envhdr",
        "filehdr",
        "stdioenv",
        "stdioarg",
        "statekey",
        "console",
        "intro",
        "redis",
        "clientauth",
        "cookie",
        "deadpw",
        "deadq",
        "cmdkey",
        "envbad",
        "urlraw",
        "urlslash",
        "redisslash",
        "redisquery",
    )
}
# Tool arguments under secret-looking keys (each its own canary).
ARG_KEYS = [
    "accessToken",
    "refreshToken",
    "clientSecret",
    "x-api-key",
    "api-key",
    "private_key",
    "id_token",
    "sessionToken",
    "Proxy-Authorization",
    "passwd",
    "db_password",
    "password",
    "Cookie",
]
ARGS = {key: _canary(f"arg{number}") for number, key in enumerate(ARG_KEYS)}
EVERY = {**C, **{f"arg {k}": v for k, v in ARGS.items()}}


def leaks(where: str, text: str, allowed: tuple[str, ...] = ()) -> list[str]:
    return [
        f"{name} in {where}"
        for name, value in EVERY.items()
        if value in text and name not in allowed
    ]


def _routes(demo: str, dead: int, secret_file: Path) -> list[str]:
    host = demo.removeprefix("http://")
    with_secrets = f"http://user:{C['urlpw']}@{host}?token={C['urlq']}"
    also = f"http://u2:{C['alsopw']}@{host}?key={C['alsoq']}"
    stdio = (  # a secret in the command's URL, another in its environment
        f"stdio:{sys.executable} -m gateway stdio --upstream http://s:{C['stdioarg']}@{host}"
        f" -H X-Service-Key=SERVICE_TOKEN,env=SERVICE_TOKEN:{C['stdioenv']}"
    )
    return [
        f"/mcp={with_secrets},also={also},headers_from_env=X-Upstream-Key:CANARY_ENV,"
        f"headers_from_file=X-File-Key:{secret_file}",
        f"/dead=http://d:{C['deadpw']}@127.0.0.1:{dead}/mcp?token={C['deadq']},timeout=3",
        f"/guarded={with_secrets},auth=gateway,public_url=http://127.0.0.1/guarded,"
        f"auth_issuer=http://127.0.0.1:{dead},auth_introspection_url=http://127.0.0.1:{dead}/i,"
        "auth_introspection_auth_env=CANARY_INTRO",
        f"/tool={stdio}",
    ]


def _env(receiver: Receiver | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        CANARY_ENV=f"Bearer {C['envhdr']}",
        CANARY_INTRO=f"Basic {C['intro']}",
        GATEWAY_STATE_KEY=C["statekey"] + "-0123456789abcdef0123456789",
        GATEWAY_CONSOLE_TOKEN=C["console"],
    )
    if receiver is not None:
        env.update(
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
            OTEL_SERVICE_NAME="canaries",
            OTEL_BSP_SCHEDULE_DELAY="50",
        )
    return env


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    found = Receiver()
    await found.start()
    try:
        yield found
    finally:
        await found.close()


def _client_headers(extra: dict[str, str]) -> dict[str, str]:
    return {
        **extra,
        "Authorization": f"Bearer {C['clientauth']}",
        "Cookie": f"sid={C['cookie']}",
    }


def _arguments() -> dict[str, Any]:
    return {"a": 2, "b": 3, **ARGS}


async def _drive_clients(http: aiohttp.ClientSession, base: str) -> list[tuple[str, str]]:
    """Every revision's client, on a good route and a dead one: what each was told."""
    told: list[tuple[str, str]] = []

    def keep(where: str, reply: Any) -> None:
        told.append((where, f"{reply.status} {dict(reply.headers)} {reply.text}"))

    for path in ("/mcp", "/dead", "/guarded", "/tool"):
        url = base + path
        for version in HANDSHAKE_REVISIONS:
            try:
                session = await open_session(http, url, version, _client_headers({}))
            except AssertionError as refused:
                # The dead route refuses at once, the guarded one (its issuer is dead)
                # too; a 2024-11-05 POST is answered with no session (its own transport
                # kept it in the endpoint URL).  Nothing else may refuse.
                refusing = path in ("/dead", "/guarded") or version == "2024-11-05"
                assert refusing, f"{path} {version}: {refused}"
                told.append((f"{path} {version} initialize", str(refused)))
                continue
            body = request(2, "tools/call", {"name": "add", "arguments": _arguments()})
            reply = await post(http, url, body, _client_headers(session_headers(session, version)))
            keep(f"{path} {version} add", reply)
            body = request(3, "tools/call", {"name": "greet_me", "arguments": {}})
            reply = await post(http, url, body, _client_headers(session_headers(session, version)))
            keep(f"{path} {version} greet_me", reply)
        body = modern_request(4, "tools/call", {"name": "add", "arguments": _arguments()})
        reply = await post(http, url, body, _client_headers(modern_headers("tools/call", "add")))
        keep(f"{path} 2026-07-28 add", reply)
        body = modern_request(5, "tools/call", {"name": "greet_me", "arguments": {}})
        reply = await post(
            http, url, body, _client_headers(modern_headers("tools/call", "greet_me"))
        )
        keep(f"{path} 2026-07-28 greet_me", reply)
    return told


async def _read_all(http: aiohttp.ClientSession, running: RunningGateway) -> list[tuple[str, str]]:
    """The ops endpoints, the route's page, and every console page (bodies recorded)."""
    seen = []
    for path in ("/", "/readyz", "/metrics", "/healthz"):
        async with http.get(running.url(path)) as resp:
            seen.append((path, f"{dict(resp.headers)} {await resp.text()}"))
    async with http.get(running.url("/mcp"), headers={"Accept": "text/html"}) as resp:
        seen.append(("/mcp page", await resp.text()))
    console = f"http://127.0.0.1:{console_port(running)}"
    auth = {"Authorization": "Basic " + base64.b64encode(f"op:{C['console']}".encode()).decode()}
    pages = ["/routes", "/fragment/routes", "/calls", "/fragment/calls", "/playground"]
    async with http.get(console + "/calls", headers=auth) as resp:
        numbers = set(re.findall(r'href="/calls/(\d+)"', await resp.text()))
    assert numbers, "the console recorded no call"
    pages += [f"/calls/{n}" for n in sorted(numbers)]
    for page in pages:
        async with http.get(console + page, headers=auth) as resp:
            assert resp.status == 200, (page, resp.status)
            seen.append((f"console {page}", f"{dict(resp.headers)} {await resp.text()}"))
    return seen


def _sealed_states(told: list[tuple[str, str]]) -> list[str]:
    """The states the gateway sealed for its clients: never shown by the console."""
    return re.findall(r"gw1\.[A-Za-z0-9_\-.]{20,}", " ".join(text for _, text in told))


async def test_no_canary_leaves_a_running_gateway(tmp_path: Path, receiver: Receiver) -> None:
    secret_file = tmp_path / "key"
    secret_file.write_text(C["filehdr"])
    with HeldPort() as dead, demo_upstream(tmp_path) as demo:
        routes = _routes(demo, dead.port, secret_file)
        extra = (
            "--console",
            "--console-listen",
            "127.0.0.1:0",
            "--console-bodies",
            "--log-level",
            "debug",
        )
        with gateway(
            *routes, extra=extra, tmp_path=tmp_path, env=_env(receiver), check=False
        ) as running:
            async with aiohttp.ClientSession() as http:
                told = await _drive_clients(http, running.base)
                seen = await _read_all(http, running)
            await receiver.wait_for(lambda spans: len(spans) > 20)
        log = running.log()
    found: list[str] = []
    for where, text in told:
        found += leaks(f"the answer to {where}", text)
    for where, text in seen:
        found += leaks(where, text)
        found += [
            f"a sealed state in {where}"
            for s in _sealed_states(told)
            if s in text and where.startswith("console")
        ]
    found += leaks("the log", log)
    spans = json.dumps([vars(span) for span in receiver.spans], default=lambda o: vars(o))
    found += leaks("the spans", spans)
    assert "Traceback" not in log, log[-3000:]
    assert found == [], "\n".join(sorted(set(found)))


def _lane_routes(demo: str, modern: str, secret_file: Path) -> list[str]:
    """A route before each era, each carrying every kind of upstream secret, and nothing
    that turns the pass-through lane off (no console, no tracing, one target)."""
    headers = (
        f"headers_from_env=X-Upstream-Key:CANARY_ENV,headers_from_file=X-File-Key:{secret_file}"
    )

    def secret(url: str) -> str:
        host, _, path = url.removeprefix("http://").partition("/")
        return f"http://user:{C['urlpw']}@{host}/{path}?token={C['urlq']}"

    return [f"/mcp={secret(demo)},{headers}", f"/m={secret(modern)},{headers}"]


async def _drive_lane(http: aiohttp.ClientSession, base: str) -> list[tuple[str, str]]:
    """Each revision's calls on both routes, twice each, after the tool list (so the
    lane carries them), with secrets in the arguments: what each client was told."""
    told: list[tuple[str, str]] = []
    tools = {"/mcp": ("add", "greet_me"), "/m": ("echo",)}
    for path, names in tools.items():
        url = base + path
        for version in ("2025-06-18", "2025-11-25"):  # the handshake era's lane revisions
            session = await open_session(http, url, version, _client_headers({}))
            headers = _client_headers(session_headers(session, version))
            await post(http, url, request(1, "tools/list"), headers)
            for number, name in enumerate(names * 2, 2):
                arguments = {"a": 2, "b": 3, "text": "t", **ARGS}
                body = request(number, "tools/call", {"name": name, "arguments": arguments})
                reply = await post(http, url, body, headers)
                told.append((f"{path} {version} {name}", f"{reply.status} {reply.text}"))
        listing = modern_request(1, "tools/list")
        await post(http, url, listing, _client_headers(modern_headers("tools/list")))
        for number, name in enumerate(names * 2, 2):
            body = modern_request(
                number, "tools/call", {"name": name, "arguments": {"a": 2, "text": "t", **ARGS}}
            )
            reply = await post(http, url, body, _client_headers(modern_headers("tools/call", name)))
            told.append(
                (f"{path} 2026-07-28 {name}", f"{reply.status} {dict(reply.headers)} {reply.text}")
            )
    return told


def _passed(metrics: str, route: str) -> float:
    found = re.search(rf'gateway_pass_through_total{{route="{re.escape(route)}"}} (\S+)', metrics)
    return float(found.group(1)) if found else 0.0


async def test_no_canary_leaves_through_the_pass_through_lane(tmp_path: Path) -> None:
    """The lane (on by default; off in the test above, whose console and tracing
    turn it off) before a handshake-era and a stateless upstream: both kinds of lane
    answer calls, and no secret reaches an answer, the log at debug or the ops pages."""
    secret_file = tmp_path / "key"
    secret_file.write_text(C["filehdr"])
    with demo_upstream(tmp_path) as demo, modern_upstream() as modern:
        routes = _lane_routes(demo, modern, secret_file)
        extra = ("--log-level", "debug")
        with gateway(
            *routes, extra=extra, tmp_path=tmp_path, env=_env(None), check=False
        ) as running:
            async with aiohttp.ClientSession() as http:
                told = await _drive_lane(http, running.base)
                seen = []
                for page in ("/", "/readyz", "/metrics", "/healthz"):
                    async with http.get(running.url(page)) as resp:
                        seen.append((page, f"{dict(resp.headers)} {await resp.text()}"))
        log = running.log()
    metrics = dict(seen)["/metrics"]
    # Each add (3 revisions x 2) and each echo (3 clients x 2); greet_me asks a client
    # that declared elicitation (so is read on), and greets the 2026-07-28 one plainly.
    assert (_passed(metrics, "/mcp"), _passed(metrics, "/m")) == (8, 6), metrics
    found = [leak for where, text in told for leak in leaks(f"the answer to {where}", text)]
    found += [leak for where, text in seen for leak in leaks(where, text)]
    found += leaks("the log", log)
    assert "Traceback" not in log, log[-3000:]
    assert found == [], "\n".join(sorted(set(found)))


def _cli(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return f"rc={done.returncode} {done.stdout} {done.stderr}"


def _raw_and_unreachable(
    routes: list[str], cluster: tuple[str, str], env: dict[str, str]
) -> dict[str, str]:
    """Passwords written with a raw '/', and a store not reached at start."""
    return {
        "a URL whose password holds a /": _cli(
            "check", "--route", f"/s=http://u:p/{C['urlslash']}@127.0.0.1:1/mcp", env=env
        ),
        "a --cluster password holding a /": _cli(
            "serve",
            "--check-config",
            "--cluster",
            f"redis://:p/{C['redisslash']}@127.0.0.1:1/0",
            env=env,
        ),
        "a --cluster password in its query, holding an @": _cli(
            "serve",
            "--check-config",
            "--cluster",
            f"redis://127.0.0.1:1/0?password=p@{C['redisquery']}",
            env=env,
        ),
        "the cluster store unreachable at start": _cli(
            "serve", "--listen", "127.0.0.1:0", *routes, *cluster, env=env
        ),
    }


def test_no_canary_leaves_check_or_check_config(tmp_path: Path) -> None:
    secret_file = tmp_path / "key"
    secret_file.write_text(C["filehdr"])
    with HeldPort() as dead, demo_upstream(tmp_path) as demo:
        routes = [
            arg for route in _routes(demo, dead.port, secret_file) for arg in ("--route", route)
        ]
        env = _env(None)
        # A route whose own rule fails (a stdio command with more URLs), holding a secret.
        command = f"stdio:true --api-key {C['cmdkey']}"
        broken = {"path": "/k", "upstream": command, "also": [demo]}
        config = tmp_path / "broken.toml"
        config.write_text(f"[[routes]]\npath = '/k'\nupstream = '{command}'\nalso = ['{demo}']\n")
        cluster = ("--cluster", f"redis://:{C['redis']}@127.0.0.1:{dead.port}/0")
        outputs = {
            "check": _cli("check", *routes, env=env),
            "check --reach": _cli("check", "--reach", *routes, env=env),
            "serve --check-config": _cli("serve", "--check-config", *routes, *cluster, env=env),
            "a bad --route": _cli("check", "--route", routes[1] + ",nonsense=1", env=env),
            "a stdio command's secret option": _cli(
                "serve",
                "--check-config",
                "--route",
                f"/k=stdio:true --api-key {C['cmdkey']}",
                env=env,
            ),
            "a route rule broken by a stdio command with a secret option": _cli(
                "check", "--route", f"/k=stdio:true --api-key {C['cmdkey']},also={demo}", env=env
            ),
            "a route rule broken in GATEWAY_ROUTES": _cli(
                "check", env={**env, "GATEWAY_ROUTES": json.dumps([broken])}
            ),
            "a route rule broken in a config file": _cli("check", "--config", str(config), env=env),
            "a bad route with env=": _cli(
                "check", "--route", f"/b={demo},auth=gateway,env=API_TOKEN:{C['envbad']}", env=env
            ),
            "a URL whose password holds a ?": _cli(
                "check", "--route", f"/q=http://u:p?{C['urlraw']}@127.0.0.1:1/mcp", env=env
            ),
            **_raw_and_unreachable(routes, cluster, env),
            "a bad --cluster": _cli(
                "serve", "--check-config", "--cluster", f"redis://:{C['redis']}@[::1", env=env
            ),
        }
    found = [leak for where, text in outputs.items() for leak in leaks(where, text)]
    assert "Traceback" not in " ".join(outputs.values()), outputs
    assert found == [], "\n".join(found) + "\n" + json.dumps(outputs, indent=1)
    # Each reached what it tests: the error it was there to provoke.
    assert "percent-encode the password" in outputs["a --cluster password holding a /"]
    started = outputs["the cluster store unreachable at start"]
    assert started.startswith("rc=1 ") and "cannot join the cluster" in started, started
