"""How a gateway process joins a cluster, and where the other replicas reach it."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

from gateway.cluster.node import ClusterNode
from gateway.cluster.store import POOL_SIZE, POOL_TIMEOUT


@dataclass(frozen=True)
class ClusterOptions:
    store_url: str  # redis://HOST:PORT/DB, file:///DIR or memory:
    advertise: str | None = None  # the URL other replicas reach this one at
    # Workers share the public port (SO_REUSEPORT): each then listens on a port of
    # its own too, for relays, and advertises that one.
    own_port: bool = False
    heartbeat_ttl: float = 10.0
    relay_timeout: float = 300.0
    # A Redis store's connections at most, and how long a command waits for one.
    pool_size: int = POOL_SIZE
    pool_timeout: float = POOL_TIMEOUT
    # Spent-state markers wait for a replica of a Redis store to hold them.
    confirm: bool = True

    def node(self, state_key: bytes) -> ClusterNode:
        from gateway.cluster import open_store

        return ClusterNode(
            open_store(self.store_url, self.pool_size, self.pool_timeout, self.confirm),
            state_key,
            heartbeat_ttl=self.heartbeat_ttl,
            relay_timeout=self.relay_timeout,
        )

    async def internal_url(self, runner: web.AppRunner, host: str, port: int) -> str:
        """Where relays reach this replica (a port of its own when workers share one)."""
        if not self.own_port:
            if self.advertise:
                return self.advertise.rstrip("/")
            return f"http://{_bracket(host)}:{port}"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), 0))
        own = int(sock.getsockname()[1])
        await web.SockSite(runner, sock).start()
        # --advertise names this machine (scheme and host); the port is the worker's own.
        parts = urlsplit(self.advertise) if self.advertise else None
        name = parts.hostname if parts is not None and parts.hostname else host
        scheme = parts.scheme if parts is not None and parts.scheme else "http"
        return f"{scheme}://{_bracket(name)}:{own}"


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
