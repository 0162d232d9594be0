"""The image: built from the unchanged Dockerfile, run as the README says, its traces."""

from __future__ import annotations

import time
from typing import Any

from containers.common import IMAGE, PROJECT, Failed, record, run, say, wait_until
from containers.http import add_answers_5, free_port, get_status


def inspect(env: dict[str, str], name: str, fmt: str) -> str:
    return run(["podman", "inspect", "--format", fmt, name], env=env).stdout.strip()


def clean_containers(env: dict[str, str]) -> None:
    """Remove every pod, container, secret and network of this private store (all ours)."""
    run(["podman", "pod", "rm", "--all", "--force"], env=env, check=False, timeout=120)
    run(["podman", "rm", "--all", "--force", "--time", "5"], env=env, check=False, timeout=120)
    run(["podman", "secret", "rm", "--all"], env=env, check=False, timeout=60)
    run(["podman", "network", "prune", "--force"], env=env, check=False, timeout=60)


def build(env: dict[str, str]) -> None:
    say("building the image from ./Dockerfile (podman build --format docker)")
    done = run(
        [
            "podman",
            "build",
            "--pull=never",
            "--format",
            "docker",
            # pip inside the build reaches PyPI through this sandbox's CA bundle.
            "--volume",
            "/etc/ssl/certs:/etc/ssl/certs:ro",
            "--tag",
            IMAGE,
            ".",
        ],
        env=env,
        timeout=1200,
        check=False,
    )
    if done.returncode != 0:
        print(done.stdout[-4000:], flush=True)
        raise Failed(f"podman build: exit {done.returncode} (its output above)")
    record("image builds from the unchanged Dockerfile", True)


def check_image(env: dict[str, str]) -> None:
    """The image alone, as the README runs it: no route, so the bundled demo."""
    name, port = f"{PROJECT}-gateway", free_port()
    run(
        [
            "podman",
            "run",
            "--detach",
            "--pull=never",
            "--name",
            name,
            "--publish",
            f"127.0.0.1:{port}:8080",
            IMAGE,
        ],
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until("/readyz", lambda: get_status(f"{base}/readyz") == 200, timeout=60)
        record("image: /readyz 200 on its published port", True, f"127.0.0.1:{port}")
    except Failed as exc:
        record("image: /readyz 200 on its published port", False, str(exc))
        print(run(["podman", "logs", name], env=env, check=False).stdout[-3000:], flush=True)
        return
    try:
        record("image: README's 2026-07-28 `add` answers 5", add_answers_5(f"{base}/mcp"))
    except Exception as exc:
        record("image: README's 2026-07-28 `add` answers 5", False, str(exc))
    uid = run(["podman", "exec", name, "id", "-u"], env=env, check=False).stdout.strip()
    user = inspect(env, name, "{{.Config.User}}")
    record("image: runs as a non-root uid", uid not in ("", "0"), f"uid {uid}, USER {user}")
    check = inspect(env, name, "{{json .Config.Healthcheck}}")
    health = run(["podman", "healthcheck", "run", name], env=env, check=False)
    status = inspect(env, name, "{{.State.Health.Status}}")
    record(
        "image: carries its HEALTHCHECK, which passes",
        "GATEWAY_HEALTHCHECK_URL" in check and health.returncode == 0 and status == "healthy",
        f"healthcheck run: exit {health.returncode}, status {status}",
    )
    drain = 30  # GATEWAY_DRAIN_TIMEOUT's default; stop waits longer than that
    began = time.monotonic()
    run(["podman", "stop", "--time", str(drain + 10), name], env=env, timeout=drain + 60)
    took = time.monotonic() - began
    code = inspect(env, name, "{{.State.ExitCode}}")
    logs = run(["podman", "logs", name], env=env, check=False).stdout
    record(
        "image: SIGTERM drains and exits 0 within the drain timeout",
        code == "0" and took < drain and '"gateway stopped"' in logs,
        f"exit {code} after {took:.1f}s",
    )


class _OtlpSink:
    """A local OTLP/HTTP receiver: keeps the bodies POSTed to /v1/traces."""

    def __init__(self) -> None:
        import http.server
        import threading

        bodies = self.bodies = []  # type: list[bytes]

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if self.path.startswith("/v1/traces"):
                    bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def check_image_traces(env: dict[str, str]) -> None:
    """The image with the standard OTEL_* environment exports a call's spans (the otel
    extra is in the image): the demo's 2026-07-28 `add`, seen at a host OTLP sink."""
    name, port, sink = f"{PROJECT}-traced", free_port(), _OtlpSink()
    name_check = "image: OTEL_* set, a call's spans reach an OTLP/HTTP receiver"
    try:
        otel = [
            f"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:{sink.port}",
            "OTEL_SERVICE_NAME=mcp-gateway-image",
            "OTEL_BSP_SCHEDULE_DELAY=200",
        ]
        argv = ["podman", "run", "--detach", "--pull=never", "--name", name]
        argv += ["--network", "host", *(a for v in otel for a in ("--env", v))]
        run([*argv, IMAGE, "--listen", f"127.0.0.1:{port}"], env=env)
        base = f"http://127.0.0.1:{port}"
        wait_until("/readyz", lambda: get_status(f"{base}/readyz") == 200, timeout=60)
        add_answers_5(f"{base}/mcp")
        wait_until(
            "a span of tools/call add",
            lambda: any(b"tools/call add" in b and b"mcp.method.name" in b for b in sink.bodies),
            timeout=30,
        )
        record(name_check, True, f"{len(sink.bodies)} export(s)")
    except Failed as exc:
        record(name_check, False, str(exc).splitlines()[0])
        print(run(["podman", "logs", name], env=env, check=False).stdout[-3000:], flush=True)
    finally:
        run(["podman", "rm", "--force", name], env=env, check=False)
        sink.close()
