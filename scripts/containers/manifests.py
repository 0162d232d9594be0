"""config/kubernetes/ read as `kubectl kustomize` would, and checked as manifests."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

from containers.common import IMAGE, PROJECT, ROOT, STATE_KEY, Failed, record

# --- Kubernetes: config/kubernetes/ on `podman kube play` ------------------------------
#
# podman (4.3 here) plays Pods, Deployments, ConfigMaps and PVCs from one file; it
# reads no kustomization, no Service, and of a Deployment only one replica.  So the
# manifests are rendered here: kustomization.yaml's resources in order (directories
# as nested kustomizations) plus its generators, exactly what `kubectl kustomize`
# gives for the fields used (any other field fails the check by name).  Then, for
# podman only, in the rendered copy (never in the manifests):
#   - each Deployment becomes `replicas` Pods, <deployment>-<n>, each with a static
#     IP on a private network (what a scheduler and the CNI would do);
#   - the downward API's status.podIP is that IP, and $(VAR) references in env,
#     command and args are expanded as the kubelet does;
#   - each Service name resolves (hostAliases) to a Pod it selects, as cluster DNS
#     would (a Service of one Pod, as mcp-redis and mcp-demo are, is exact), and its
#     ports are published on 127.0.0.1 for every Pod it selects: the check talks to
#     the replicas of a Service round-robin, as kube-proxy would spread connections;
#   - a Secret is created with `podman secret create`, in the form podman 4.3 reads
#     (it stores one in a kube file in a form it cannot read back), holding what an
#     operator puts in place of the placeholder (a random state key here).
# Probes are run by the check from the host against each Pod IP, as the kubelet
# runs them from the node (podman itself does not act on readiness probes).

KUBE_DIR = Path(os.environ.get("CONTAINER_CHECK_KUBE_DIR") or ROOT / "config" / "kubernetes")
KUBE_NETWORK = f"{PROJECT}-kube"
# What an operator puts in place of the placeholder Secret (state-key.yaml).
KUBE_SECRETS = {"gateway-state-key": {"GATEWAY_STATE_KEY": STATE_KEY}}
KUSTOMIZE_FIELDS = {
    "apiVersion",
    "kind",
    "resources",
    "configMapGenerator",
    "secretGenerator",
    "generatorOptions",
}
GATEWAY_UID = 10001  # the Dockerfile's USER


def yaml_module() -> Any:
    try:
        import yaml
    except ImportError:
        raise Failed(
            "PyYAML is needed to render config/kubernetes (pip install pyyaml; "
            "the project's test extra has it)"
        ) from None
    return yaml


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize DIRECTORY` for resources and generators (no name hashes)."""
    yaml = yaml_module()
    path = directory / "kustomization.yaml"
    if not path.is_file():
        raise Failed(f"{path}: no kustomization.yaml")
    spec = yaml.safe_load(path.read_text()) or {}
    unknown = sorted(set(spec) - KUSTOMIZE_FIELDS)
    if unknown:
        raise Failed(f"{path}: the check's renderer does not do {', '.join(unknown)}")
    docs: list[dict[str, Any]] = []
    for entry in spec.get("resources") or []:
        target = (directory / entry).resolve()
        if target.is_dir():
            docs += kustomize(target)
        elif target.is_file():
            docs += [d for d in yaml.safe_load_all(target.read_text()) if d]
        else:
            raise Failed(f"{path}: resource {entry!r} does not exist")
    generators = [("ConfigMap", g) for g in spec.get("configMapGenerator") or []]
    generators += [("Secret", g) for g in spec.get("secretGenerator") or []]
    if generators and (spec.get("generatorOptions") or {}) != {"disableNameSuffixHash": True}:
        raise Failed(
            f"{path}: generators need generatorOptions.disableNameSuffixHash: true "
            "(the renderer makes no name hashes)"
        )
    for kind, gen in generators:
        extra = sorted(set(gen) - {"name", "files", "literals", "type"})
        if extra:
            raise Failed(f"{path}: {kind} generator {gen.get('name')}: no {', '.join(extra)}")
        data: dict[str, str] = {}
        for item in gen.get("files") or []:
            key, _, name = item.rpartition("=")
            source = (directory / name).resolve()
            if directory.resolve() not in source.parents:
                raise Failed(
                    f"{path}: {name} is not in or below {directory} (kustomize refuses it)"
                )
            data[key or source.name] = source.read_text()
        for item in gen.get("literals") or []:
            key, _, value = item.partition("=")
            data[key] = value
        doc: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": {"name": gen["name"]}}
        if kind == "Secret":
            doc["type"] = gen.get("type", "Opaque")
            doc["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        else:
            doc["data"] = data
        docs.append(doc)
    return docs


def kinds(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") == kind]


def pod_containers(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    return list(deployment["spec"]["template"]["spec"].get("containers") or [])


def is_gateway(container: dict[str, Any]) -> bool:
    """A container running the gateway itself (not the demo server the image also has)."""
    return str(container.get("image", "")).startswith(IMAGE) and not container.get("command")


def env_value(container: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((e for e in container.get("env") or [] if e.get("name") == name), None)


def check_manifests(docs: list[dict[str, Any]]) -> None:
    """What the manifests must say, read from the rendered documents."""
    deployments = kinds(docs, "Deployment")
    names = {d["metadata"]["name"]: d for d in deployments}
    problems: list[str] = []
    if not {"mcp-sidecar", "mcp-gateway", "mcp-redis", "mcp-demo"} <= set(names):
        problems.append(
            f"Deployments {sorted(names)}: want mcp-sidecar, mcp-gateway, mcp-redis, mcp-demo"
        )
    for dep in deployments:
        name, pod = dep["metadata"]["name"], dep["spec"]["template"]["spec"]
        pod_sc = pod.get("securityContext") or {}
        for c in pod_containers(dep):
            where = f"{name}/{c['name']}"
            sc = {**pod_sc, **(c.get("securityContext") or {})}
            problems += _container_problems(where, c, sc)
            if is_gateway(c):
                problems += _gateway_problems(where, c, sc, pod)
    problems += _cluster_problems(names)
    record(
        "kubernetes manifests: non-root, read-only root, probes, resources, grace > drain",
        not problems,
        "; ".join(problems)
        or f"{len(deployments)} Deployments, {len(kinds(docs, 'Service'))} Services",
    )


def _container_problems(where: str, c: dict[str, Any], sc: dict[str, Any]) -> list[str]:
    """What every container must say: non-root, read-only root, resources, probes."""
    problems = []
    if sc.get("runAsNonRoot") is not True or not sc.get("runAsUser"):
        problems.append(f"{where}: runAsNonRoot with a runAsUser")
    if sc.get("readOnlyRootFilesystem") is not True:
        problems.append(f"{where}: readOnlyRootFilesystem: true")
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{where}: allowPrivilegeEscalation: false")
    if (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
        problems.append(f"{where}: capabilities drop [ALL]")
    res = c.get("resources") or {}
    for part in ("requests", "limits"):
        if not {"cpu", "memory"} <= set(res.get(part) or {}):
            problems.append(f"{where}: resources.{part} cpu and memory")
    for probe in ("readinessProbe", "livenessProbe"):
        if not c.get(probe):
            problems.append(f"{where}: no {probe}")
    local = ("Never", "IfNotPresent")
    if str(c.get("image", "")).startswith(IMAGE) and c.get("imagePullPolicy") not in local:
        problems.append(f"{where}: imagePullPolicy Never or IfNotPresent (a local image)")
    return problems


def _gateway_problems(
    where: str, c: dict[str, Any], sc: dict[str, Any], pod: dict[str, Any]
) -> list[str]:
    """What a gateway container must say besides: its uid, probes, key, drain, /tmp."""
    problems = []
    if sc.get("runAsUser") != GATEWAY_UID:
        problems.append(f"{where}: runAsUser {GATEWAY_UID} (the Dockerfile's USER)")
    ready = (c.get("readinessProbe") or {}).get("httpGet") or {}
    alive = (c.get("livenessProbe") or {}).get("httpGet") or {}
    if ready.get("path") != "/readyz" or alive.get("path") != "/healthz":
        problems.append(f"{where}: readiness httpGet /readyz, liveness httpGet /healthz")
    key = env_value(c, "GATEWAY_STATE_KEY") or {}
    if not (key.get("valueFrom") or {}).get("secretKeyRef"):
        problems.append(f"{where}: GATEWAY_STATE_KEY from a Secret (secretKeyRef)")
    drain = float((env_value(c, "GATEWAY_DRAIN_TIMEOUT") or {}).get("value") or 30)
    stop = (((c.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command")
    if not stop:
        problems.append(f"{where}: a preStop (endpoints drop the Pod before SIGTERM)")
    pause = float(stop[-1]) if stop and stop[0] == "sleep" else 0.0
    grace = float(pod.get("terminationGracePeriodSeconds", 30))
    if grace <= pause + drain:
        problems.append(
            f"{where}: terminationGracePeriodSeconds {grace:g} <= preStop {pause:g} "
            f"+ GATEWAY_DRAIN_TIMEOUT {drain:g}"
        )
    writable = {m["mountPath"] for m in c.get("volumeMounts") or []}
    if "/tmp" not in writable:
        problems.append(f"{where}: an emptyDir on /tmp (the root is read-only)")
    return problems


def _cluster_problems(names: dict[str, dict[str, Any]]) -> list[str]:
    """The replicated Deployment and the sidecar Pod."""
    problems = []
    cluster = names.get("mcp-gateway")
    if cluster:
        c = next((c for c in pod_containers(cluster) if is_gateway(c)), {})
        pod_ip = ((env_value(c, "POD_IP") or {}).get("valueFrom") or {}).get("fieldRef", {})
        if cluster["spec"].get("replicas", 1) < 2:
            problems.append("mcp-gateway: several replicas")
        if pod_ip.get("fieldPath") != "status.podIP" or "$(POD_IP)" not in str(
            (env_value(c, "GATEWAY_ADVERTISE") or {}).get("value")
        ):
            problems.append("mcp-gateway: GATEWAY_ADVERTISE from the Pod IP (downward API)")
        if not str((env_value(c, "GATEWAY_CLUSTER") or {}).get("value", "")).startswith("redis://"):
            problems.append("mcp-gateway: GATEWAY_CLUSTER redis://<the Redis Service>")
    sidecar = names.get("mcp-sidecar")
    if sidecar and len(pod_containers(sidecar)) != 2:
        problems.append("mcp-sidecar: the legacy server and the gateway in one Pod")
    return problems


def selects(service: dict[str, Any], labels: dict[str, str]) -> bool:
    selector = service["spec"].get("selector") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def port_of(
    containers: list[dict[str, Any]], target: Any
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    for c in containers:
        for p in c.get("ports") or []:
            if target in (p.get("name"), p.get("containerPort")):
                return c, p
    return None


def expand(text: str, values: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion ($$ escapes; an unknown name stays as it is)."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i) and ")" in text[i:]:
            end = text.index(")", i)
            name = text[i + 2 : end]
            out.append(values.get(name, text[i : end + 1]))
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)
