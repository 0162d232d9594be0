"""What a listener wants of an upstream's change notifications, in neutral terms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Interest:
    """The list changes wanted (by notification method) and the resource URIs
    watched (None: none asked for; items as the client sent them)."""

    lists: frozenset[str] = frozenset()
    uris: tuple[Any, ...] | None = None

    @property
    def empty(self) -> bool:
        return not self.lists and not self.uris
