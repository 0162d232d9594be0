"""How many pools (stateless clients' shared upstream sessions) each principal holds.

The pool bounds (per principal, and in all) are checked whenever a pool is opened.
Counting by walking every session of the route (the mirrors of client sessions
included) made opening N pools take N^2 steps; counted as sessions come and go,
a check costs the same with ten pools or ten thousand.
"""

from __future__ import annotations

from collections import Counter


class PoolCounts:
    def __init__(self) -> None:
        self._of: Counter[str] = Counter()
        self.total = 0

    def held(self, principal: str) -> int:
        return self._of[principal]

    def add(self, principal: str) -> None:
        self._of[principal] += 1
        self.total += 1

    def remove(self, principal: str) -> None:
        left = self._of[principal] - 1
        if left > 0:
            self._of[principal] = left
        else:
            self._of.pop(principal, None)
        self.total -= 1

    def clear(self) -> None:
        self._of.clear()
        self.total = 0
