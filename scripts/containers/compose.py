"""compose.yaml's default and cluster profiles on podman-compose."""

from __future__ import annotations

from pathlib import Path

from containers.common import PROJECT, ROUNDS, Failed, record, run, say, wait_until
from containers.http import get_status, greet_round, handshake_session, modern_call, port_free


def compose(compose_bin: Path, env: dict[str, str], *args: str, timeout: float = 300) -> str:
    cmd = [str(compose_bin), "--in-pod", "false", "-p", PROJECT, "-f", "compose.yaml", *args]
    return run(cmd, env=env, timeout=timeout).stdout


def wait_ports_free(*ports: int) -> None:
    wait_until(
        f"127.0.0.1 ports {ports} free (compose.yaml publishes them)",
        lambda: all(port_free(p) for p in ports),
        timeout=60,
    )


def check_compose_default(compose_bin: Path, env: dict[str, str]) -> None:
    """compose.yaml's default profile: the gateway in front of the legacy placeholder."""
    wait_ports_free(8080)
    say("podman-compose up (default profile: legacy + gateway)")
    compose(compose_bin, env, "up", "--detach", "--no-build", "--pull", "never")
    base = "http://127.0.0.1:8080"
    try:
        wait_until("gateway /readyz", lambda: get_status(f"{base}/readyz") == 200, timeout=90)
        # The placeholder speaks 2025-06-18 only; both kinds of client reach its echo.
        answer = modern_call(f"{base}/mcp", 1, "echo", {"text": "through the sidecar"})
        modern_ok = answer["result"]["content"][0]["text"] == "through the sidecar"
        handshake_session(f"{base}/mcp", "echo", {"text": "hi"}, "hi")
        record(
            "compose default: 2026-07-28 and 2025-11-25 calls reach the legacy server", modern_ok
        )
    except Exception as exc:
        record(
            "compose default: 2026-07-28 and 2025-11-25 calls reach the legacy server",
            False,
            str(exc),
        )
        print(compose_logs(compose_bin, env), flush=True)
    compose(compose_bin, env, "down")


def compose_logs(compose_bin: Path, env: dict[str, str], *profile: str) -> str:
    cmd = [
        str(compose_bin),
        "--in-pod",
        "false",
        "-p",
        PROJECT,
        *profile,
        "-f",
        "compose.yaml",
        "logs",
    ]
    return run(cmd, env=env, check=False, timeout=60).stdout[-6000:]


def _replica_ready(env: dict[str, str], replica: str) -> bool:
    probe = (
        "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=3)"
    )
    command = ["podman", "exec", replica, "python", "-c", probe]
    return run(command, env=env, check=False).returncode == 0


def _wait_cluster_ready(env: dict[str, str], replicas: list[str]) -> None:
    wait_until(
        "every replica ready",
        lambda: all(_replica_ready(env, r) for r in replicas),
        timeout=120,
        interval=1,
    )
    wait_until(
        "nginx answers /readyz",
        lambda: get_status("http://127.0.0.1:8081/readyz") == 200,
        timeout=60,
    )


def check_compose_cluster(compose_bin: Path, env: dict[str, str]) -> None:
    """The cluster profile: three replicas, Redis and nginx in front of the demo."""
    wait_ports_free(8080, 8081)
    say("podman-compose --profile cluster up (3 replicas, redis, nginx, demo)")
    profile = ("--profile", "cluster")
    compose(compose_bin, env, *profile, "up", "--detach", "--no-build", "--pull", "never")
    url = "http://127.0.0.1:8081/mcp"
    replicas = [f"{PROJECT}_replica-{n}_1" for n in (1, 2, 3)]
    try:
        _wait_cluster_ready(env, replicas)
    except Failed as exc:
        record("cluster: replicas ready behind nginx", False, str(exc))
        print(compose_logs(compose_bin, env, *profile), flush=True)
        compose(compose_bin, env, *profile, "down")
        return
    greet_owners: list[str] = []
    session_owners: list[str] = []
    try:
        for n in range(ROUNDS):
            greet_owners.append(greet_round(url, 10 * n + 1))
            session = handshake_session(url, "add", {"a": n, "b": 3}, str(n + 3))
            session_owners.append(session.split(".")[0])
        greet_ok = session_ok = True
        problem = ""
    except Exception as exc:
        greet_ok = session_ok = False
        problem = str(exc)
    record(
        f"cluster via nginx: 2026-07-28 greet_me input_required round trip x{ROUNDS}",
        greet_ok and len(greet_owners) == ROUNDS,
        problem or f"parked on {len(set(greet_owners))} replicas",
    )
    record(
        f"cluster via nginx: 2025-11-25 session (initialize, initialized, add) x{ROUNDS}",
        session_ok and len(session_owners) == ROUNDS,
        problem or f"sessions owned by {len(set(session_owners))} replicas",
    )
    served = {}
    for replica in replicas:
        logs = run(["podman", "logs", replica], env=env, check=False).stdout
        served[replica.split("_")[1]] = logs.count('"event": "call"')
    owners = set(greet_owners) | set(session_owners)
    record(
        "cluster: requests landed on all three replicas",
        len(owners) == 3 and all(served.values()),
        f"owner ids {sorted(owners)}; calls logged {served}",
    )
    if not (greet_ok and session_ok):
        print(compose_logs(compose_bin, env, *profile), flush=True)
    compose(compose_bin, env, *profile, "down")
