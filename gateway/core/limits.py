"""Bounds on what a message may be, checked before any recursive code sees it, and on
the descriptors the process may use."""

from __future__ import annotations

import errno
import os
import resource
import time
from typing import Any

# JSON nesting deeper than this is refused: real MCP messages stay far below it, and
# every recursive walk of a message (projection, validation, encoding) stays safe.
MAX_DEPTH = 64


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests objects/arrays more than ``limit`` levels deep.

    Iterative, so a hostile message cannot exhaust the stack while being measured.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            # Only the root can be a scalar (children are pushed only if containers),
            # so `break` would end the same empty stack: an equivalent mutant.
            continue  # pragma: no mutate
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class DescriptorBudget:
    """Whether the process has descriptors to spare for new work.

    Refusing new requests while ``reserve`` descriptors are still free keeps the
    process able to answer (with 503), to log and to shut down, instead of
    failing in ``accept()`` and wherever a socket or pipe is opened.  The count
    (``/proc/self/fd``) is sampled at most every ``interval`` seconds.
    """

    # The interval is a tuning value (how stale the count may be), not a behaviour.
    def __init__(self, reserve: int, interval: float = 0.25) -> None:  # pragma: no mutate
        self.reserve = reserve
        self.interval = interval
        self._open = 0
        self._limit = self.limit()
        self._at = float("-inf")

    @staticmethod
    def limit() -> int:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return soft if soft != resource.RLIM_INFINITY else 1 << 20

    def open_count(self) -> int:
        now = time.monotonic()
        if now - self._at >= self.interval:
            self._limit = self.limit()  # sampled with the count: a syscall each
            try:
                self._open = len(os.listdir("/proc/self/fd"))
            except OSError as exc:
                # Out of descriptors already (listing takes one), or no /proc at all.
                self._open = self.limit() if exc.errno in (errno.EMFILE, errno.ENFILE) else 0
            self._at = now
        return self._open

    def exhausted(self) -> bool:
        return self.reserve > 0 and self.open_count() >= self._limit - self.reserve
