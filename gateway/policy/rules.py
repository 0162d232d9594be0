"""Which names a route exposes: an allow list or a deny list of glob patterns.

A rule is written ``allow:PATTERN[|PATTERN...]`` (only what matches is exposed) or
``deny:PATTERN[|PATTERN...]`` (everything but what matches).  Patterns are shell
globs matched case-sensitively against the whole name (a tool's or prompt's name,
a resource's URI or URI template): ``*`` any run of characters, ``?`` one,
``[abc]`` one of a set.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import translate

MODES = ("allow", "deny")
# Patterns a rule may hold: matching is one regular expression, and a rule is
# configuration, never a caller's input, but a typo repeated by a script should fail.
MAX_PATTERNS = 1000


@dataclass(frozen=True)
class Rule:
    """``allow`` or ``deny`` and its patterns, compiled into one expression;
    ``canonical``: the one form both patterns and names are compared in (resource
    URIs: policy/uris.py), None for a name that has none (refused by either mode)."""

    mode: str
    patterns: tuple[str, ...]
    canonical: Callable[[str], str | None] | None = field(default=None, compare=False)
    _match: Callable[[str], re.Match[str] | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"a rule is allow:... or deny:..., not {self.mode!r}")
        canonical = self.canonical
        patterns = [(canonical(p) or p) if canonical else p for p in self.patterns]
        joined = "|".join(f"(?:{translate(p)})" for p in patterns) or r"(?!)"
        object.__setattr__(self, "_match", re.compile(joined).match)

    @classmethod
    def parse(cls, text: str, canonical: Callable[[str], str | None] | None = None) -> Rule:
        """``allow:P1|P2`` or ``deny:P1|P2`` (ValueError naming the problem)."""
        mode, sep, rest = text.partition(":")
        mode = mode.strip().lower()
        if not sep or mode not in MODES:
            raise ValueError("expected allow:PATTERN[|PATTERN...] or deny:PATTERN[|PATTERN...]")
        patterns = tuple(p.strip() for p in rest.split("|") if p.strip())
        if not patterns:
            raise ValueError(f"{mode}: names no pattern")
        if len(patterns) > MAX_PATTERNS:
            raise ValueError(f"at most {MAX_PATTERNS} patterns")
        return cls(mode, patterns, canonical)

    def allows(self, name: object) -> bool:
        """Whether ``name`` is exposed: a name that is not a string, or that has no
        canonical form, never is, whatever the mode."""
        if not isinstance(name, str):
            return False
        if self.canonical is not None:
            found = self.canonical(name)
            if found is None:
                return False
            name = found
        matched = self._match(name) is not None
        return matched if self.mode == "allow" else not matched

    def __str__(self) -> str:
        return f"{self.mode}:{'|'.join(self.patterns)}"
