"""The host side: the programs the check needs, a private podman configuration, and
the stand-in base images (mmdebstrap)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from containers.common import (
    APT_PACKAGES,
    CACHE,
    MIRROR,
    PODMAN_COMPOSE,
    RUN_DIR,
    STATE_KEY,
    SUITE,
    Failed,
    record,
    run,
    say,
)

# --- 1. tools ---------------------------------------------------------------------


def dpkg_installed(package: str) -> bool:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True
    )
    return done.returncode == 0 and done.stdout.strip().endswith(" installed")


def ensure_tools() -> Path:
    """podman & co. from apt, podman-compose from PyPI; a clear failure otherwise."""
    if os.geteuid() != 0:
        raise Failed("needs root: rootful podman (run as root, as CI does)")
    if not shutil.which("apt-get") or not shutil.which("dpkg-query"):
        raise Failed("needs a Debian system (apt-get) to install: " + " ".join(APT_PACKAGES))
    missing = [p for p in APT_PACKAGES if not dpkg_installed(p)]
    if missing:
        say(f"installing {' '.join(missing)} (apt)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        lock = ["-o", "DPkg::Lock::Timeout=300"]
        run(["apt-get", *lock, "update", "-qq"], timeout=600, env=env)
        done = run(
            ["apt-get", *lock, "install", "-y", "-qq", "--no-install-recommends", *missing],
            timeout=900,
            env=env,
            check=False,
        )
        still = [p for p in missing if not dpkg_installed(p)]
        if done.returncode != 0 or still:
            raise Failed(
                f"could not install {' '.join(still or missing)} with apt-get "
                f"(exit {done.returncode})\n" + (done.stdout or "")[-2000:]
            )
    for program in ("podman", "runc", "mmdebstrap"):
        if not shutil.which(program):
            raise Failed(f"'{program}' is not on PATH after installing it")
    venv = CACHE / "compose-venv"
    compose = venv / "bin" / "podman-compose"
    marker = venv / "installed.txt"
    if not (compose.exists() and marker.exists() and marker.read_text() == PODMAN_COMPOSE):
        say(f"installing {PODMAN_COMPOSE} (PyPI) in {venv}")
        shutil.rmtree(venv, ignore_errors=True)
        try:
            run([sys.executable, "-m", "venv", str(venv)], timeout=120)
            run([str(venv / "bin" / "pip"), "install", "--quiet", PODMAN_COMPOSE], timeout=600)
        except Failed as exc:
            raise Failed(f"could not install 'podman-compose' ({PODMAN_COMPOSE}): {exc}") from None
        marker.write_text(PODMAN_COMPOSE)
    return compose


# --- 2. a private podman configuration ---------------------------------------------


def configure() -> dict[str, str]:
    conf = CACHE / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (CACHE / "networks").mkdir(exist_ok=True)
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    (conf / "storage.conf").write_text(
        "[storage]\n"
        'driver = "vfs"\n'
        f'graphroot = "{CACHE / "storage"}"\n'
        f'runroot = "{RUN_DIR / "runroot"}"\n'
    )
    (conf / "containers.conf").write_text(
        "[containers]\n"
        "default_ulimits = []\n"
        "[engine]\n"
        'cgroup_manager = "cgroupfs"\n'
        'runtime = "runc"\n'
        'events_logger = "file"\n'
        f'events_logfile_path = "{RUN_DIR / "events.log"}"\n'
        f'tmp_dir = "{RUN_DIR / "tmp"}"\n'
        "[network]\n"
        'network_backend = "netavark"\n'
        f'network_config_dir = "{CACHE / "networks"}"\n'
    )
    # Short names (python:3.11-slim) resolve to docker.io/library/..., which is
    # where the stand-in images are tagged; nothing is ever pulled (--pull=never).
    (conf / "registries.conf").write_text(
        'unqualified-search-registries = ["docker.io"]\nshort-name-mode = "permissive"\n'
    )
    return {
        **os.environ,
        "CONTAINERS_CONF": str(conf / "containers.conf"),
        "CONTAINERS_STORAGE_CONF": str(conf / "storage.conf"),
        "CONTAINERS_REGISTRIES_CONF": str(conf / "registries.conf"),
        "GATEWAY_STATE_KEY": STATE_KEY,  # compose.yaml's cluster replicas need one
    }


# --- 3. stand-in base images ---------------------------------------------------------

REDIS_ENTRYPOINT = r"""#!/bin/sh
# What the official redis image's docker-entrypoint.sh does for compose.yaml's use:
# options alone mean redis-server; it runs as the redis user; protected mode is off
# (the container network is the boundary) unless a config file sets it.
set -e
if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then set -- redis-server "$@"; fi
if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
    find . \! -user redis -exec chown redis '{}' +
    exec setpriv --reuid=redis --regid=redis --init-groups "$0" "$@"
fi
if [ "$1" = redis-server ]; then
    protected=1 config=
    if [ -f "${2:-}" ]; then
        config=$2
        if grep -q '^protected-mode' "$config"; then protected=; fi
    fi
    if [ -n "$protected" ]; then
        shift
        if [ -n "$config" ]; then shift; fi
        set -- --protected-mode no "$@"
        if [ -n "$config" ]; then set -- "$config" "$@"; fi
        set -- redis-server "$@"
    fi
fi
exec "$@"
"""

PATH_ENV = "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BASE_IMAGES: list[dict[str, Any]] = [
    {
        "tag": "docker.io/library/python:3.11-slim",
        "packages": [
            "python3",
            "python3-venv",
            "python-is-python3",
            "ca-certificates",
            "passwd",
            "adduser",
        ],
        "files": {},
        "hooks": [],
        "changes": [PATH_ENV, "ENV LANG=C.UTF-8", 'CMD ["python3"]'],
    },
    {
        "tag": "docker.io/library/redis:7-alpine",
        "packages": ["redis-server"],
        "files": {"/usr/local/bin/docker-entrypoint.sh": REDIS_ENTRYPOINT},
        "hooks": [
            'chmod 755 "$1/usr/local/bin/docker-entrypoint.sh"',
            'mkdir -p "$1/data" && chroot "$1" chown redis:redis /data',
        ],
        "changes": [
            PATH_ENV,
            "WORKDIR /data",
            "EXPOSE 6379",
            'ENTRYPOINT ["docker-entrypoint.sh"]',
            'CMD ["redis-server"]',
        ],
    },
    {
        "tag": "docker.io/library/nginx:1.27-alpine",
        "packages": ["nginx-light"],
        "files": {},
        "hooks": [  # the official image logs to the container's output
            'ln -sf /dev/stdout "$1/var/log/nginx/access.log"',
            'ln -sf /dev/stderr "$1/var/log/nginx/error.log"',
        ],
        "changes": [
            PATH_ENV,
            "EXPOSE 80",
            "STOPSIGNAL SIGQUIT",
            'CMD ["nginx", "-g", "daemon off;"]',
        ],
    },
]
DPKG_OPTS = [
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/info/*",
]
KEY_LABEL = "mcp-gateway-container.key"


def image_key(spec: dict[str, Any]) -> str:
    what = {"suite": SUITE, "mirror": MIRROR, "dpkg": DPKG_OPTS, **spec}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def ensure_base_images(env: dict[str, str]) -> None:
    images = CACHE / "images"
    images.mkdir(parents=True, exist_ok=True)
    made: list[str] = []
    for spec in BASE_IMAGES:
        tag, key = spec["tag"], image_key(spec)
        have = run(
            ["podman", "image", "inspect", "--format", f'{{{{index .Labels "{KEY_LABEL}"}}}}', tag],
            env=env,
            check=False,
        )
        if have.returncode == 0 and have.stdout.strip() == key:
            continue
        tarball = images / f"{tag.rsplit('/', 1)[-1].replace(':', '-')}-{key}.tar"
        if not tarball.exists():
            say(f"making {tag} with mmdebstrap ({' '.join(spec['packages'])})")
            with tempfile.TemporaryDirectory(prefix="container-check-") as scratch:
                cmd = [
                    "mmdebstrap",
                    "--variant=minbase",
                    "--mode=root",
                    "--quiet",
                    f"--include={','.join(spec['packages'])}",
                    *[f"--dpkgopt={opt}" for opt in DPKG_OPTS],
                    '--aptopt=Acquire::Retries "3"',
                ]
                for n, (path, text) in enumerate(spec["files"].items()):
                    local = Path(scratch) / f"file{n}"
                    local.write_text(text)
                    cmd.append(f'--customize-hook=cp {local} "$1{path}"')
                cmd += [f"--customize-hook={hook}" for hook in spec["hooks"]]
                partial = tarball.with_name(tarball.stem + ".partial.tar")
                cmd += [SUITE, str(partial), MIRROR]
                run(cmd, timeout=900)
                partial.rename(tarball)
        say(f"importing {tag}")
        changes = [*spec["changes"], f"LABEL {KEY_LABEL}={key}"]
        run(
            ["podman", "import", "--quiet", *[f"--change={c}" for c in changes], str(tarball), tag],
            env=env,
            timeout=600,
        )
        made.append(tag.rsplit("/", 1)[-1])
        for stale in images.glob(f"{tarball.name.rsplit('-', 1)[0]}-*.tar"):
            if stale != tarball:
                stale.unlink()
    record(
        "stand-in base images (bookworm, mmdebstrap)",
        True,
        f"imported {', '.join(made)}" if made else "cached",
    )
