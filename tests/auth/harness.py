"""An OAuth world for end-to-end tests: an authorization server and a protected MCP
server (both on the official Python SDK's auth support), and OAuth clients of
several SDKs, all as real subprocesses on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.gateway_proc import free_port

REPO = Path(__file__).resolve().parents[2]
PEERS = REPO / ".peers"
HERE = Path(__file__).resolve().parent / "peers"
# The SDK the servers are built on (its auth server module and FastMCP's auth).
SERVER_SDK = "1.22.0"
READY = 30.0


def interpreter(version: str) -> str:
    path = PEERS / f"py-{version}" / "bin" / "python"
    if not path.exists():
        pytest.fail(f"{path} is missing: run tests/interop/peers/install")
    return str(path)


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)


@contextlib.contextmanager
def spawn(argv: list[str], port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Start a server and wait (bounded) until its port accepts connections."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO
        )
    try:
        deadline = time.monotonic() + READY
        while not _port_open(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{argv[1:3]} did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.05)  # polling, bounded by the deadline
        yield process
    finally:
        _stop(process)


@dataclass
class World:
    issuer: str
    upstream: str  # the protected MCP endpoint
    gateway_port: int
    seen_file: Path
    service_token: str

    @property
    def gateway_base(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}"

    def seen(self) -> list[str]:
        """Every bearer token the protected server was shown."""
        if not self.seen_file.exists():
            return []
        return [line for line in self.seen_file.read_text().splitlines() if line]


@contextlib.contextmanager
def oauth_world(tmp_path: Path, public_path: str = "/mcp") -> Iterator[World]:
    """The authorization server and the protected server; tokens are for the gateway
    (its public URL is the audience the protected server accepts, as an operator
    who puts the gateway in front would configure it)."""
    python = interpreter(SERVER_SDK)
    as_port, up_port, gw_port = free_port(), free_port(), free_port()
    issuer = f"http://127.0.0.1:{as_port}"
    public = f"http://127.0.0.1:{gw_port}{public_path}"
    upstream = f"http://127.0.0.1:{up_port}/mcp"
    script = str(HERE / "oauth_servers.py")
    service_token = "service-" + os.urandom(8).hex()
    seen = tmp_path / "seen-tokens.txt"
    as_argv = [python, script, "authorization-server", "--port", str(as_port)]
    up_argv = [python, script, "protected-server", "--port", str(up_port), "--issuer", issuer]
    up_argv += ["--audience", public, "--audience", upstream]
    up_argv += ["--service-token", service_token, "--seen-file", str(seen)]
    with (
        spawn([*as_argv, "--default-audience", public], as_port, tmp_path / "as.log"),
        spawn(up_argv, up_port, tmp_path / "upstream.log"),
    ):
        yield World(issuer, upstream, gw_port, seen, service_token)


NODE_DIR = REPO / "tests" / "interop" / "peers" / "node"


def node_client_argv(url: str) -> list[str]:
    """The TypeScript SDK's OAuth client (it resolves the SDK from the node peers)."""
    import shutil

    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH")
    if not (NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").exists():
        pytest.fail(f"{NODE_DIR}/node_modules is missing: run tests/interop/peers/install")
    return [node, str(NODE_DIR / "oauth_client_sdk1.mjs"), "--url", url]


def run_client(version: str, url: str, timeout: float = 90.0) -> dict[str, Any]:
    """The SDK's OAuth client against ``url`` (``version`` "ts": the TypeScript SDK's);
    its JSON report."""
    if version == "ts":
        argv = node_client_argv(url)
    else:
        script = "oauth_client_v2.py" if version.startswith("2.") else "oauth_client.py"
        argv = [interpreter(version), str(HERE / script), "--url", url]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, cwd=REPO, check=False)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the {version} client did not finish in {timeout}s") from exc
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"client {version} exited {done.returncode}:\n{stderr[-4000:]}"
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        raise AssertionError(f"client {version} printed no JSON:\n{stderr[-4000:]}") from None
    report["_stderr"] = stderr
    return report


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


def http(
    url: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], Any]:
    """One request (POST when there is a body); status, headers, JSON body or text."""
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=dict(headers or {}))
    if data is not None:
        request.add_header("Content-Type", "application/json")
        request.add_header("Accept", "application/json, text/event-stream")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, got, raw = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        status, got, raw = error.code, dict(error.headers), error.read()
    try:
        return status, got, json.loads(raw)
    except ValueError:
        return status, got, raw.decode(errors="replace")


def mint(world: World, **claims: Any) -> str:
    """A token from the test authorization server (``untrusted_key=True``: signed with
    a key nobody trusts)."""
    untrusted = bool(claims.pop("untrusted_key", False))
    _, _, body = http(world.issuer + "/test/mint", {"claims": claims, "untrusted_key": untrusted})
    return str(body["token"])
