"""Bounds on what a message may be, checked before any recursive code sees it."""

from __future__ import annotations

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
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
