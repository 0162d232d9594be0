"""A store in a directory: what ``--workers N`` shares on one machine without Redis.

Every entry is a small file, written whole and renamed into place (so a reader
never sees half of one); single use is an exclusive create; a rate limit's token
bucket is a file locked (``flock``) while it is read and rewritten.  Expiry is
wall clock time, since the readers are other processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from gateway.cluster.store import MAX_RESULTS, Replica
from gateway.policy import MAX_BUCKETS, Limit, Taken, full_after, take_one_each

# Used-state markers older than this many of their own TTLs are swept now and then.
_SWEEP_EVERY = 256


class FileStore:
    """The cluster's shared state as files under ``root`` (created if missing)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        for part in ("replicas", "used", "verdicts", "results", "buckets"):
            (self.root / part).mkdir(parents=True, exist_ok=True)
        self._uses = 0
        self._takes = 0

    def _write(self, path: Path, data: dict[str, Any]) -> None:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        tmp.write_bytes(orjson.dumps(data))
        os.replace(tmp, path)

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            data = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        if not isinstance(data, dict) or data.get("expiry", 0) < time.time():
            return None
        return data

    async def register(self, replica: Replica, ttl: float) -> bool:
        path = self.root / "replicas" / f"{_safe(replica.id)}.json"
        was = self._read(path) is not None  # (an expired one reads as None)
        entry = {"replica": orjson.loads(replica.dump()), "expiry": time.time() + ttl}
        self._write(path, entry)
        return was

    async def follow_primary(self) -> bool:
        return False  # one directory: no primary to follow

    async def deregister(self, replica_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.root / "replicas" / f"{_safe(replica_id)}.json").unlink()

    async def replica(self, replica_id: str) -> Replica | None:
        data = self._read(self.root / "replicas" / f"{_safe(replica_id)}.json")
        return None if data is None else Replica.load(orjson.dumps(data.get("replica")))

    async def replicas(self) -> list[Replica]:
        found = []
        for path in (self.root / "replicas").glob("*.json"):
            data = self._read(path)
            replica = None if data is None else Replica.load(orjson.dumps(data.get("replica")))
            if replica is not None:
                found.append(replica)
        return found

    async def use_once(self, key: str, ttl: float) -> bool:
        self._uses += 1
        if self._uses % _SWEEP_EVERY == 0:
            self._sweep_used()
        path = self.root / "used" / _safe(key)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as marker:
            marker.write(str(time.time() + ttl))
        return True

    def _sweep_used(self) -> None:
        now = time.time()
        for path in (self.root / "used").iterdir():
            with contextlib.suppress(OSError, ValueError):
                if float(path.read_text() or 0) < now:
                    path.unlink()

    async def verdict(self, route: str) -> dict[str, Any] | None:
        data = self._read(self.root / "verdicts" / f"{_safe(route)}.json")
        value = None if data is None else data.get("verdict")
        return value if isinstance(value, dict) else None

    async def put_verdict(self, route: str, verdict: dict[str, Any], ttl: float) -> None:
        entry = {"verdict": verdict, "expiry": time.time() + ttl}
        self._write(self.root / "verdicts" / f"{_safe(route)}.json", entry)

    async def result(self, key: str) -> bytes | None:
        data = self._read(self.root / "results" / f"{_safe(key)}.json")
        value = None if data is None else data.get("result")
        return value.encode() if isinstance(value, str) else None

    async def put_result(self, key: str, raw: bytes, ttl: float) -> None:
        folder = self.root / "results"
        entries = list(folder.glob("*.json"))
        if len(entries) >= MAX_RESULTS:  # expired ones go; if none has, this is not kept
            for path in entries:
                if self._read(path) is None:
                    with contextlib.suppress(OSError):
                        path.unlink()
            if len(list(folder.glob("*.json"))) >= MAX_RESULTS:
                return
        entry = {"result": raw.decode(), "expiry": time.time() + ttl}
        self._write(folder / f"{_safe(key)}.json", entry)

    async def take_tokens(self, limits: Sequence[Limit]) -> Taken:
        """The buckets' files locked in one order (no two workers wait on each other),
        read, rewritten and unlocked: one worker's take at a time per bucket."""
        self._takes += 1
        if self._takes % _SWEEP_EVERY == 0:
            self._sweep_buckets()
        now = time.time()
        paths = [self.root / "buckets" / _safe(key) for key, _ in limits]
        fds: dict[Path, int] = {}
        try:
            for path in sorted(set(paths)):
                fds[path] = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                fcntl.flock(fds[path], fcntl.LOCK_EX)
            held = [_bucket(os.pread(fds[path], 256, 0)) for path in paths]
            taken, levels = take_one_each(held, limits, now)
            for path, level, (_, rate) in zip(paths, levels, limits, strict=True):
                entry = orjson.dumps({"v": level, "t": now, "x": now + full_after(rate)})
                os.ftruncate(fds[path], 0)
                os.pwrite(fds[path], entry, 0)
            return taken
        finally:
            for fd in fds.values():
                os.close(fd)  # and with it the lock

    def _sweep_buckets(self, now: float | None = None) -> None:
        """Buckets full again are forgotten; past MAX_BUCKETS, the least recently used."""
        now = time.time() if now is None else now
        kept = []
        for path in (self.root / "buckets").iterdir():
            with contextlib.suppress(OSError, ValueError, TypeError):
                data = orjson.loads(path.read_bytes() or b"{}")
                if float(data.get("x", 0)) < now:
                    path.unlink()
                else:
                    kept.append((path.stat().st_mtime, path))
        for _, path in sorted(kept)[: max(0, len(kept) - MAX_BUCKETS)]:
            with contextlib.suppress(OSError):
                path.unlink()

    async def close(self) -> None:
        return None


def _bucket(raw: bytes) -> tuple[float, float] | None:
    """A bucket file's tokens and when they were counted (None: new, or unreadable)."""
    try:
        data = orjson.loads(raw)
        return float(data["v"]), float(data["t"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def _safe(name: str) -> str:
    """A file name for any key: a digest (keys may hold '/', ':' and the like)."""
    return hashlib.sha256(name.encode()).hexdigest()[:40]
