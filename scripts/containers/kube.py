"""config/kubernetes/ played on `podman kube play`, and talked MCP through."""

from __future__ import annotations

import base64
import json
import os
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from containers.common import CACHE, ROOT, ROUNDS, Failed, record, run, say, wait_until
from containers.http import free_port, greet_round, handshake_session, modern_call
from containers.image import inspect
from containers.manifests import (
    GATEWAY_UID,
    KUBE_DIR,
    KUBE_NETWORK,
    KUBE_SECRETS,
    check_manifests,
    expand,
    is_gateway,
    kinds,
    kustomize,
    port_of,
    selects,
    yaml_module,
)


def for_podman(
    docs: list[dict[str, Any]], subnet: str
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, list[tuple[str, int]]]]:
    """The podman-only rendering (see above): documents, Pods (name -> ip, spec,
    deployment) and each Service's published ports (name -> [(pod, host port)])."""
    pods = _pods_of(docs, subnet)
    published, aliases = _publish(docs, pods)
    out: list[dict[str, Any]] = [d for d in docs if d["kind"] in ("ConfigMap",)]
    for info in pods.values():
        spec = info["doc"]["spec"]
        spec["hostAliases"] = [*spec.get("hostAliases", []), *aliases]
        for c in spec["containers"]:
            _resolve_env(c, info["ip"])
        out.append(info["doc"])
    return out, pods, published


def _pods_of(docs: list[dict[str, Any]], subnet: str) -> dict[str, dict[str, Any]]:
    """Each Deployment's replicas as Pods, each with an address of ``subnet``."""
    import copy
    import ipaddress

    hosts = ipaddress.ip_network(subnet).hosts()
    for _ in range(10):  # .1 is the network's gateway; leave a few
        next(hosts)
    pods: dict[str, dict[str, Any]] = {}
    for dep in kinds(docs, "Deployment"):
        for n in range(int(dep["spec"].get("replicas", 1))):
            template = copy.deepcopy(dep["spec"]["template"])
            name = f"{dep['metadata']['name']}-{n}"
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": template["metadata"].get("labels", {})},
                "spec": template["spec"],
            }
            pods[name] = {"ip": str(next(hosts)), "doc": pod, "deployment": dep["metadata"]["name"]}
    return pods


def _publish(
    docs: list[dict[str, Any]], pods: dict[str, dict[str, Any]]
) -> tuple[dict[str, list[tuple[str, int]]], list[dict[str, Any]]]:
    """Each Service's ports published on loopback (per Pod it selects), and the host
    aliases that name each Service after its first Pod."""
    published: dict[str, list[tuple[str, int]]] = {}
    aliases: list[dict[str, Any]] = []
    for service in kinds(docs, "Service"):
        sname = service["metadata"]["name"]
        chosen = [p for p in pods.values() if selects(service, p["doc"]["metadata"]["labels"])]
        if not chosen:
            raise Failed(f"Service {sname}: its selector matches no Pod")
        aliases.append({"ip": chosen[0]["ip"], "hostnames": [sname]})
        for sport in service["spec"]["ports"]:
            for p in chosen:
                host_port = _published_port(sname, sport, p["doc"])
                published.setdefault(sname, []).append((p["doc"]["metadata"]["name"], host_port))
    return published, aliases


def _published_port(sname: str, sport: dict[str, Any], pod: dict[str, Any]) -> int:
    target = sport.get("targetPort", sport["port"])
    found = port_of(pod["spec"]["containers"], target)
    if not found:
        raise Failed(
            f"Service {sname}: targetPort {target!r} is no container port of "
            f"Pod {pod['metadata']['name']}"
        )
    _, cport = found
    if sport["port"] != cport["containerPort"]:
        raise Failed(
            f"Service {sname}: port {sport['port']} != the container's "
            f"{cport['containerPort']} (the renderer publishes one port)"
        )
    host_port = free_port()
    cport.update(hostIP="127.0.0.1", hostPort=host_port)
    return host_port


def _resolve_env(c: dict[str, Any], ip: str) -> None:
    """The container's status.podIP references and $(VAR) expansions, resolved."""
    values: dict[str, str] = {}
    for e in c.get("env") or []:
        field = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if field == "status.podIP":
            e.pop("valueFrom")
            e["value"] = ip
        if "value" in e:
            e["value"] = expand(str(e["value"]), values)
            values[e["name"]] = e["value"]
    for key in ("command", "args"):
        if c.get(key):
            c[key] = [expand(str(a), values) for a in c[key]]


def create_secrets(env: dict[str, str], docs: list[dict[str, Any]]) -> None:
    for secret in kinds(docs, "Secret"):
        name = secret["metadata"]["name"]
        given = KUBE_SECRETS.get(name)
        if given is None:
            raise Failed(f"Secret {name}: the check has no value for it (KUBE_SECRETS)")
        keys = set(secret.get("data") or {}) | set(secret.get("stringData") or {})
        if set(given) != keys:
            raise Failed(f"Secret {name}: keys {sorted(keys)}, the check gives {sorted(given)}")
        # podman 4.3 reads a secretKeyRef's Secret as a JSON map of key to base64 value.
        real = {k: base64.b64encode(v.encode()).decode() for k, v in given.items()}
        with tempfile.TemporaryDirectory(prefix="container-check-") as scratch:
            path = Path(scratch) / "secret.json"
            path.write_text(json.dumps(real))
            run(["podman", "secret", "create", name, str(path)], env=env)


def probe_once(ip: str, container: dict[str, Any], probe: dict[str, Any]) -> str:
    """One probe as the kubelet runs it, from the node to the Pod IP: '' or the problem."""
    import http.client

    if "httpGet" in probe:
        get = probe["httpGet"]
        found = port_of([container], get["port"])
        port = found[1]["containerPort"] if found else get["port"]
        if not isinstance(port, int):
            return f"httpGet port {get['port']!r} is no port of the container"
        conn = http.client.HTTPConnection(ip, port, timeout=3)
        try:
            conn.request("GET", get.get("path", "/"))
            status = conn.getresponse().status
        except OSError as exc:
            return f"GET {ip}:{port}{get.get('path', '/')}: {exc}"
        finally:
            conn.close()
        return (
            "" if 200 <= status < 400 else f"GET {ip}:{port}{get.get('path', '/')}: HTTP {status}"
        )
    if "tcpSocket" in probe:
        target = probe["tcpSocket"]["port"]
        found = port_of([container], target)
        port = found[1]["containerPort"] if found else target
        if not isinstance(port, int):
            return f"tcpSocket port {target!r} is no port of the container"
        try:
            socket.create_connection((ip, port), timeout=3).close()
        except OSError as exc:
            return f"connect {ip}:{port}: {exc}"
        return ""
    return f"a probe the check does not run: {sorted(probe)}"


def describe_probe(probe: dict[str, Any]) -> str:
    if "httpGet" in probe:
        return f"httpGet {probe['httpGet'].get('path', '/')}:{probe['httpGet']['port']}"
    return next(iter(probe), "?") + ":" + str(next(iter(probe.values()), {}).get("port", "?"))


def pod_logs(env: dict[str, str], pods: dict[str, dict[str, Any]]) -> str:
    out = []
    for name, info in pods.items():
        for c in info["doc"]["spec"]["containers"]:
            logs = run(["podman", "logs", f"{name}-{c['name']}"], env=env, check=False).stdout
            out.append(f"--- {name}-{c['name']}\n{logs[-1500:]}")
    return "\n".join(out)


def rotate(urls: list[str]) -> Callable[[], str]:
    """The next replica's URL on every call: a Service spreading connections."""
    state = {"n": 0}

    def next_url() -> str:
        state["n"] += 1
        return urls[(state["n"] - 1) % len(urls)]

    return next_url


def check_kubernetes(env: dict[str, str]) -> None:
    yaml = yaml_module()
    docs = kustomize(KUBE_DIR)
    say(
        f"rendered {KUBE_DIR.relative_to(ROOT) if ROOT in KUBE_DIR.parents else KUBE_DIR}: "
        + ", ".join(f"{d['kind']}/{d['metadata']['name']}" for d in docs)
    )
    check_manifests(docs)
    run(["podman", "network", "create", KUBE_NETWORK], env=env)
    subnet = run(
        [
            "podman",
            "network",
            "inspect",
            "--format",
            "{{range .Subnets}}{{.Subnet}} {{end}}",
            KUBE_NETWORK,
        ],
        env=env,
    ).stdout.split()[0]
    played, pods, published = for_podman(docs, subnet)
    create_secrets(env, docs)
    with tempfile.TemporaryDirectory(prefix="container-check-") as scratch:
        kube_file = Path(scratch) / "kubernetes.yaml"
        kube_file.write_text(yaml.safe_dump_all(played, sort_keys=False))
        say(f"podman kube play ({len(pods)} Pods on {KUBE_NETWORK} {subnet})")
        ips = [f"--ip={info['ip']}" for info in pods.values()]
        done = run(
            ["podman", "kube", "play", "--network", KUBE_NETWORK, *ips, str(kube_file)],
            env=env,
            timeout=600,
            check=False,
        )
        keep = os.environ.get("CONTAINER_CHECK_KEEP") == "1"
        try:
            if done.returncode != 0:
                raise Failed(f"podman kube play: exit {done.returncode}\n{done.stdout[-3000:]}")
            record("kubernetes: podman kube play", True, f"{len(pods)} Pods")
            kube_checks(env, pods, published)
            if not keep:
                check_stop(env, pods)
        finally:
            if keep:
                (CACHE / "kubernetes.yaml").write_text(kube_file.read_text())
                say(f"CONTAINER_CHECK_KEEP=1: the Pods stay up ({CACHE / 'kubernetes.yaml'})")
            else:
                kube_down(env, kube_file)


def kube_down(env: dict[str, str], kube_file: Path) -> None:
    down = run(["podman", "kube", "down", str(kube_file)], env=env, check=False, timeout=300)
    left = run(["podman", "pod", "ps", "--quiet"], env=env, check=False).stdout.split()
    record(
        "kubernetes: podman kube down removes the Pods",
        down.returncode == 0 and not left,
        f"exit {down.returncode}, {len(left)} Pods left",
    )
    run(["podman", "secret", "rm", "--all"], env=env, check=False)
    run(["podman", "network", "rm", "--force", KUBE_NETWORK], env=env, check=False)


def check_stop(env: dict[str, str], pods: dict[str, dict[str, Any]]) -> None:
    """SIGTERM to each gateway container (what the kubelet sends after the preStop):
    it drains and exits 0 well within the Pod's grace period."""
    stopped = {}
    for name, info in pods.items():
        spec = info["doc"]["spec"]
        grace = int(spec.get("terminationGracePeriodSeconds", 30))
        for c in spec["containers"]:
            if not is_gateway(c):
                continue
            ctr = f"{name}-{c['name']}"
            began = time.monotonic()
            run(["podman", "stop", "--time", str(grace), ctr], env=env, timeout=grace + 60)
            took = time.monotonic() - began
            code = inspect(env, ctr, "{{.State.ExitCode}}")
            logs = run(["podman", "logs", ctr], env=env, check=False).stdout
            ok = code == "0" and '"gateway stopped"' in logs and took < grace
            stopped[ctr] = f"exit {code} after {took:.1f}s" + ("" if ok else " (FAILED)")
    record(
        "kubernetes: SIGTERM drains each gateway, exit 0 within the grace period",
        bool(stopped) and all("FAILED" not in v for v in stopped.values()),
        ", ".join(f"{k} {v}" for k, v in stopped.items()),
    )


def kube_checks(
    env: dict[str, str],
    pods: dict[str, dict[str, Any]],
    published: dict[str, list[tuple[str, int]]],
) -> None:
    _check_ready(env, pods)
    _check_users(env, pods)
    _check_sidecar(env, pods, published)
    _check_replicas(env, pods, published)


def _check_ready(env: dict[str, str], pods: dict[str, dict[str, Any]]) -> None:
    # Ready: every readiness probe passes, run as the kubelet would.
    def unready() -> list[str]:
        waiting = []
        for name, info in pods.items():
            for c in info["doc"]["spec"]["containers"]:
                probe = c.get("readinessProbe")
                problem = probe_once(info["ip"], c, probe) if probe else "no readinessProbe"
                if problem:
                    waiting.append(f"{name}/{c['name']} {describe_probe(probe or {})}: {problem}")
        return waiting

    try:
        wait_until("every readiness probe passing", lambda: not unready(), timeout=120, interval=1)
    except Failed:
        record(
            "kubernetes: every Pod ready (readiness probes, from the node)",
            False,
            "; ".join(unready()),
        )
        print(pod_logs(env, pods), flush=True)
        raise Failed("kubernetes: Pods not ready") from None
    count = sum(len(i["doc"]["spec"]["containers"]) for i in pods.values())
    record(
        "kubernetes: every Pod ready (readiness probes, from the node)",
        True,
        f"{len(pods)} Pods, {count} containers",
    )
    dead = [
        f"{name}/{c['name']} {describe_probe(c['livenessProbe'])}: {problem}"
        for name, info in pods.items()
        for c in info["doc"]["spec"]["containers"]
        if c.get("livenessProbe") and (problem := probe_once(info["ip"], c, c["livenessProbe"]))
    ]
    record("kubernetes: every liveness probe passes", not dead, "; ".join(dead))


def _check_users(env: dict[str, str], pods: dict[str, dict[str, Any]]) -> None:
    count = sum(len(i["doc"]["spec"]["containers"]) for i in pods.values())
    # Non-root, read-only root: what the runtime actually gives each container.
    wrong = []
    for name, info in pods.items():
        pod_sc = info["doc"]["spec"].get("securityContext") or {}
        for c in info["doc"]["spec"]["containers"]:
            ctr = f"{name}-{c['name']}"
            want = {**pod_sc, **(c.get("securityContext") or {})}.get("runAsUser")
            uid = run(["podman", "exec", ctr, "id", "-u"], env=env, check=False).stdout.strip()
            readonly = inspect(env, ctr, "{{.HostConfig.ReadonlyRootfs}}")
            write = run(["podman", "exec", ctr, "touch", "/.container-check"], env=env, check=False)
            if uid != str(want) or uid == "0":
                wrong.append(f"{ctr}: uid {uid}, manifest {want}")
            if readonly != "true" or write.returncode == 0:
                wrong.append(f"{ctr}: root filesystem writable")
            if is_gateway(c):
                tmp = run(
                    ["podman", "exec", ctr, "touch", "/tmp/.container-check"], env=env, check=False
                )
                if str(uid) != str(GATEWAY_UID) or tmp.returncode != 0:
                    wrong.append(
                        f"{ctr}: uid {uid} (want {GATEWAY_UID}), /tmp writable: "
                        f"{tmp.returncode == 0}"
                    )
    record(
        f"kubernetes: containers run as their non-root uid ({GATEWAY_UID} for the gateway), "
        "read-only root",
        not wrong,
        "; ".join(wrong) or f"{count} containers",
    )


def _check_sidecar(
    env: dict[str, str],
    pods: dict[str, dict[str, Any]],
    published: dict[str, list[tuple[str, int]]],
) -> None:
    # The sidecar Pod: both kinds of client reach the legacy server through the gateway.
    for service in ("mcp-sidecar", "mcp-gateway"):
        if service not in published:
            raise Failed(f"kubernetes: no Service {service} to call")
    (_, port), *_ = published["mcp-sidecar"]
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        answer = modern_call(url, 1, "echo", {"text": "through the sidecar Pod"})
        modern_ok = answer["result"]["content"][0]["text"] == "through the sidecar Pod"
        handshake_session(url, "echo", {"text": "hi"}, "hi")
        record(
            "kubernetes sidecar: 2026-07-28 and 2025-11-25 calls reach the legacy server",
            modern_ok,
            str(answer) if not modern_ok else "",
        )
    except Exception as exc:
        record(
            "kubernetes sidecar: 2026-07-28 and 2025-11-25 calls reach the legacy server",
            False,
            str(exc),
        )
        print(pod_logs(env, {k: v for k, v in pods.items() if k.startswith("mcp-sidecar")}))


def _check_replicas(
    env: dict[str, str],
    pods: dict[str, dict[str, Any]],
    published: dict[str, list[tuple[str, int]]],
) -> None:
    # The replicas: each request of a round trip on the next replica, as a Service would.
    replicas = published["mcp-gateway"]
    next_url = rotate([f"http://127.0.0.1:{p}/mcp" for _, p in replicas])
    greet_owners: list[str] = []
    session_owners: list[str] = []
    problem = ""
    try:
        for n in range(ROUNDS):
            greet_owners.append(greet_round(next_url, 10 * n + 1))
            session = handshake_session(next_url, "add", {"a": n, "b": 3}, str(n + 3))
            session_owners.append(session.split(".")[0])
    except Exception as exc:
        problem = str(exc)
    record(
        f"kubernetes replicas: 2026-07-28 greet_me input_required round trip x{ROUNDS}",
        not problem and len(greet_owners) == ROUNDS,
        problem or f"parked on {len(set(greet_owners))} replicas",
    )
    record(
        f"kubernetes replicas: 2025-11-25 session (initialize, initialized, add) x{ROUNDS}",
        not problem and len(session_owners) == ROUNDS,
        problem or f"sessions owned by {len(set(session_owners))} replicas",
    )
    served = {}
    for pod, _ in replicas:
        logs = run(["podman", "logs", f"{pod}-gateway"], env=env, check=False).stdout
        served[pod] = logs.count('"event": "call"')
    owners = set(greet_owners) | set(session_owners)
    record(
        f"kubernetes replicas: requests served by all {len(replicas)} replicas",
        len(owners) == len(replicas) and all(served.values()),
        f"owner ids {sorted(owners)}; calls logged {served}",
    )
    if problem:
        print(pod_logs(env, {k: v for k, v in pods.items() if not k.startswith("mcp-sidecar")}))
