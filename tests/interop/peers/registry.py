"""Registry of interop peers and the harness that runs them as subprocesses.

Importable by tests (``tests/interop/conftest.py`` puts ``tests/interop`` on
``sys.path``)::

    from peers.registry import PEERS, peer, peers_for, running_server, run_client

Every peer is a program written against one pinned official MCP SDK, run by
the interpreter installed by ``tests/interop/peers/install`` (see CONTRACT.md).
Python peers are listed here; other languages register through a
``peers.json`` file beside their scripts (see ``load_json_peers``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PEERS_DIR = ROOT / ".peers"
PY_DIR = HERE / "python"
INSTALL_HINT = "run tests/interop/peers/install"

Role = Literal["server", "client"]
Transport = Literal["streamable-http", "sse", "stdio"]

READY_TIMEOUT = 20.0
STOP_GRACE = 5.0


@dataclass(frozen=True)
class Peer:
    """One runnable peer: a server or a client driver of one SDK at one revision.

    ``argv`` is the base command line; the harness appends the contract's
    arguments (``--transport`` ... for servers, ``--url``/``--command`` ... for
    clients) and ``extra_args``.
    """

    name: str
    sdk: str
    revision: str
    role: Role
    transports: tuple[Transport, ...]
    argv: tuple[str, ...]
    requires: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    notes: str = ""
    capabilities: frozenset[str] = field(default_factory=frozenset)
    revisions: tuple[str, ...] = ()
    """Every revision the peer speaks (newest first); empty means just `revision`."""

    @property
    def speaks(self) -> tuple[str, ...]:
        return self.revisions or (self.revision,)

    @property
    def missing(self) -> str | None:
        """Why the peer cannot run here (its SDK is not installed), or None."""
        if os.sep not in self.argv[0] and shutil.which(self.argv[0]) is None:
            return f"{self.name}: {self.argv[0]} is not on PATH"
        for path in (self.argv[0], *self.requires):
            if os.sep in path and not Path(path).exists():
                return f"{self.name}: {path} is missing; {INSTALL_HINT}"
        return None

    @property
    def installed(self) -> bool:
        return self.missing is None

    def http_transport(self) -> Transport:
        """The peer's preferred HTTP transport (streamable-http, else sse)."""
        for transport in ("streamable-http", "sse"):
            if transport in self.transports:
                return transport  # type: ignore[return-value]
        raise ValueError(f"{self.name} has no HTTP transport")

    def server_argv(
        self, transport: Transport, host: str = "127.0.0.1", port: int = 0
    ) -> list[str]:
        assert self.role == "server", self.name
        args = [*self.argv, "--transport", transport]
        if transport != "stdio":
            args += ["--host", host, "--port", str(port)]
        return [*args, *self.extra_args]

    def client_argv(
        self,
        target: str | list[str],
        transport: Transport,
        scenario: str,
        args: Sequence[str] = (),
    ) -> list[str]:
        assert self.role == "client", self.name
        argv = [*self.argv, "--transport", transport, "--scenario", scenario]
        if transport == "stdio":
            command = target if isinstance(target, str) else shlex.join(target)
            argv += ["--command", command]
        else:
            assert isinstance(target, str)
            argv += ["--url", target]
        return [*argv, *self.extra_args, *args]


# --- Python peers -----------------------------------------------------------------------

# One pinned `mcp` release per revision: the newest revision each one speaks
# (client and server alike) is exactly that revision.
PYTHON_PINS: dict[str, str] = {
    "2024-11-05": "1.7.1",  # last release whose only HTTP transport is HTTP+SSE
    "2025-03-26": "1.9.4",
    "2025-06-18": "1.22.0",
    "2025-11-25": "1.30.0",
    "2026-07-28": "2.3.0",  # also speaks the handshake era (2025-11-25) on the same endpoint
}


_HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def _speaks(revision: str) -> tuple[str, ...]:
    """Revisions a pinned Python SDK speaks, newest first (as verified in its mcp/types)."""
    if revision == "2026-07-28":
        return (revision, *reversed(_HANDSHAKE))
    return tuple(reversed(_HANDSHAKE[: _HANDSHAKE.index(revision) + 1]))


def _python_caps(revision: str, version: str) -> set[str]:
    """What a pinned Python SDK's peers can do (its revision and major version say)."""
    v2 = version.split(".")[0] == "2"
    caps = {"tools", "resources", "prompts", "completions", "logging", "sampling", "roots"}
    caps.add("progress")
    if revision >= "2025-03-26":
        caps.add("progress_message")
    if revision >= "2025-06-18":
        caps |= {"elicitation", "structured_output"}
    if not v2 and version != "1.7.1":
        caps.add("pagination")
    if not v2:
        # The conformance suite's `test_missing_capability` tool (asks sampling).
        caps.add("missing_capability_tool")
    return caps


def _python_peers() -> list[Peer]:
    out: list[Peer] = []
    for revision, version in PYTHON_PINS.items():
        interpreter = str(PEERS_DIR / f"py-{version}" / "bin" / "python")
        v2 = version.split(".")[0] == "2"
        transports: tuple[Transport, ...] = (
            ("sse", "stdio") if version == "1.7.1" else ("streamable-http", "sse", "stdio")
        )
        caps = frozenset(_python_caps(revision, version))
        for role, program in (("server", "server"), ("client", "client")):
            script = f"{program}_v2.py" if v2 else f"{program}_v1.py"
            out.append(
                Peer(
                    name=f"python-{version}-{role}",
                    sdk=f"python-mcp {version}",
                    revision=revision,
                    role=role,
                    transports=transports,
                    argv=(interpreter, str(PY_DIR / script)),
                    capabilities=caps,
                    revisions=_speaks(revision) if role == "server" else (),
                )
            )
    out.append(_python_legacy_client())
    return out


def _python_legacy_client() -> Peer:
    """The 2.x client can also speak the handshake era: `Client(mode="legacy")` offers
    2025-11-25 (the only handshake version it offers)."""
    v2 = PYTHON_PINS["2026-07-28"]
    return Peer(
        name=f"python-{v2}-client-legacy",
        sdk=f"python-mcp {v2}",
        revision="2025-11-25",
        role="client",
        transports=("streamable-http", "sse", "stdio"),
        argv=(str(PEERS_DIR / f"py-{v2}" / "bin" / "python"), str(PY_DIR / "client_v2.py")),
        extra_args=("--mode", "legacy"),
        capabilities=frozenset(
            {"tools", "resources", "prompts", "completions", "logging", "sampling", "roots"}
            | {"progress", "progress_message", "elicitation", "structured_output"}
        ),
    )


# --- Peers registered by other languages (JSON) ------------------------------------------

# >>> Other languages register here WITHOUT editing this file: drop a `peers.json`
# >>> into tests/interop/peers/<lang>/ (format in CONTRACT.md, "Registering peers").
JSON_PEER_FILES: tuple[Path, ...] = (HERE / "node" / "peers.json",)


def _expand(value: str, base: Path) -> str:
    return value.format(root=str(ROOT), repo=str(ROOT), peers=str(PEERS_DIR), dir=str(base))


def load_json_peers(path: Path) -> list[Peer]:
    """Read a peers.json file: a JSON list of peer objects (see CONTRACT.md)."""
    if not path.is_file():
        return []
    entries = json.loads(path.read_text())
    out = []
    for entry in entries:
        base = path.parent
        out.append(
            Peer(
                name=entry["name"],
                sdk=entry["sdk"],
                revision=entry["revision"],
                role=entry["role"],
                transports=tuple(entry["transports"]),
                argv=tuple(_expand(a, base) for a in entry["argv"]),
                revisions=tuple(entry.get("revisions", (entry["revision"],))),
                # Default: the language's install dir (.peers/<lang>) must exist.
                requires=tuple(
                    _expand(a, base) for a in entry.get("requires", (f"{{peers}}/{base.name}",))
                ),
                extra_args=tuple(_expand(a, base) for a in entry.get("extra_args", ())),
                notes=entry.get("notes", ""),
                capabilities=frozenset(entry.get("capabilities", ())),
            )
        )
    return out


def all_peers() -> list[Peer]:
    peers = _python_peers()
    for path in JSON_PEER_FILES:
        peers += load_json_peers(path)
    names = [p.name for p in peers]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"duplicate peer names: {sorted(dupes)}")
    return peers


PEERS: list[Peer] = all_peers()


def peer(name: str) -> Peer:
    for p in PEERS:
        if p.name == name:
            return p
    raise KeyError(name)


def peers_for(
    *, role: Role | None = None, revision: str | None = None, sdk_prefix: str | None = None
) -> list[Peer]:
    return [
        p
        for p in PEERS
        if (role is None or p.role == role)
        and (revision is None or p.revision == revision)
        and (sdk_prefix is None or p.sdk.startswith(sdk_prefix))
    ]


# Set to 1 to skip (instead of fail) tests whose peers are not installed: a local
# opt-out only; the test command and CI never set it.
ALLOW_MISSING_ENV = "GATEWAY_TESTS_ALLOW_MISSING_PEERS"


def require_installed(*peers: Peer) -> None:
    """Fail, naming the peer and the install command, when a peer's SDK is missing.

    A half-installed peer tree must not turn protection into a green run; only an
    explicit local opt-out (``GATEWAY_TESTS_ALLOW_MISSING_PEERS=1``) skips instead.
    """
    import pytest

    missing = [p.missing for p in peers if p.missing]
    if not missing:
        return
    if os.environ.get(ALLOW_MISSING_ENV) == "1":
        pytest.skip("; ".join(missing))
    pytest.fail("missing test peer(s): " + "; ".join(missing), pytrace=False)


# Route options a server peer needs behind the gateway.  python mcp 1.9.x servers exit
# when any session is DELETEd (a direct client's exit kills them too), so the gateway
# must not end its upstream sessions there.
ROUTE_QUIRKS = {"python-1.9.4-server": ",end_sessions=false"}


def route_options(server: Peer) -> str:
    """What to append to a `--route PATH=URL` for this server peer."""
    return ROUTE_QUIRKS.get(server.name, "")


# --- Harness -----------------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def _stop(proc: subprocess.Popen[bytes], grace: float = STOP_GRACE) -> None:
    """Terminate the process group, kill it after `grace` seconds, and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=grace)
    else:  # the leader is gone; make sure nothing of its group lingers
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text[-limit:]


def server_url(transport: Transport, host: str, port: int) -> str:
    return (
        f"http://{host}:{port}/mcp"
        if transport == "streamable-http"
        else f"http://{host}:{port}/sse"
    )


@contextlib.contextmanager
def running_server(
    peer: Peer,
    transport: Transport,
    *,
    host: str = "127.0.0.1",
    ready_timeout: float = READY_TIMEOUT,
) -> Iterator[str | list[str]]:
    """Start `peer` (a server) and yield its URL, or its argv for stdio.

    HTTP: starts the subprocess in its own process group on a free port, polls
    the port until it accepts connections (bounded), and on exit terminates
    the group (SIGKILL after a grace period) and reaps it.  Raises
    RuntimeError with the captured stderr if it dies or never becomes ready.
    stdio: nothing is started; the client launches the yielded argv itself.
    """
    if peer.role != "server":
        raise ValueError(f"{peer.name} is not a server")
    if transport not in peer.transports:
        raise ValueError(f"{peer.name} does not support {transport}")
    if transport == "stdio":
        yield peer.server_argv("stdio")
        return
    port = free_port(host)
    argv = peer.server_argv(transport, host, port)
    with tempfile.TemporaryDirectory(prefix="mcp-peer-") as tmp:
        log = Path(tmp) / "stderr.log"
        with log.open("wb") as err:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                start_new_session=True,
                cwd=ROOT,
            )
        try:
            deadline = time.monotonic() + ready_timeout
            while not _port_open(host, port):
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{peer.name} ({transport}) exited with {proc.returncode} before "
                        f"listening on {port}\nargv: {shlex.join(argv)}\nstderr:\n{_tail(log)}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{peer.name} ({transport}) not listening on {port} after "
                        f"{ready_timeout}s\nargv: {shlex.join(argv)}\nstderr:\n{_tail(log)}"
                    )
                time.sleep(0.05)  # polling interval, bounded by the deadline above
            yield server_url(transport, host, port)
        finally:
            _stop(proc)


def run_client(
    peer: Peer,
    target: str | list[str],
    transport: Transport,
    scenario: str = "basic",
    timeout: float = 90.0,
    args: Sequence[str] = (),
) -> dict[str, Any]:
    """Run a client driver against `target` (URL, or server argv for stdio); return its JSON.

    `args` are appended to the command line (scenario options such as `--root-a`)."""
    if peer.role != "client":
        raise ValueError(f"{peer.name} is not a client")
    argv = peer.client_argv(target, transport, scenario, args)
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        cwd=ROOT,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc, grace=1.0)
        stdout, stderr = proc.communicate()
        raise AssertionError(
            f"{peer.name} did not finish within {timeout}s\nargv: {shlex.join(argv)}\n"
            f"stderr:\n{stderr.decode(errors='replace')[-4000:]}"
        ) from None
    finally:
        _stop(proc, grace=1.0)
    err = stderr.decode(errors="replace")
    assert proc.returncode == 0, (
        f"{peer.name} exited with {proc.returncode}\nargv: {shlex.join(argv)}\n"
        f"stderr:\n{err[-4000:]}"
    )
    try:
        data = json.loads(stdout)
    except ValueError:
        raise AssertionError(
            f"{peer.name} printed no JSON object\n"
            f"stdout:\n{stdout.decode(errors='replace')[-2000:]}"
            f"\nstderr:\n{err[-4000:]}"
        ) from None
    assert isinstance(data, dict) and "steps" in data, f"{peer.name}: unexpected output {data!r}"
    data["_stderr"] = err
    return data
