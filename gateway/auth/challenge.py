"""`WWW-Authenticate` challenges (RFC 7235, RFC 6750): parsing, writing, rewriting."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TOKEN68 = re.compile(r"[A-Za-z0-9._~+/-]+=*")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_SPACE_OR_COMMA = re.compile(r"[\s,]*")
_SPACE = re.compile(r"\s*")


@dataclass
class Challenge:
    """One challenge: its scheme, and its auth-params (names lower-cased) or token68."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)
    token68: str | None = None

    @property
    def is_bearer(self) -> bool:
        return self.scheme.lower() == "bearer"

    def __str__(self) -> str:
        if self.token68 is not None:
            return f"{self.scheme} {self.token68}"
        if not self.params:
            return self.scheme
        return f"{self.scheme} " + ", ".join(f"{k}={_quote(v)}" for k, v in self.params.items())


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _param_at(text: str, pos: int) -> tuple[str, str, int] | None:
    """An auth-param starting at ``pos``: (name, value, end), or None."""
    name = _TOKEN.match(text, pos)
    if name is None:
        return None
    after = _SPACE.match(text, name.end())
    eq = after.end() if after else name.end()
    if eq >= len(text) or text[eq] != "=":
        return None
    start = _SPACE.match(text, eq + 1)
    vpos = start.end() if start else eq + 1
    quoted = _QUOTED.match(text, vpos)
    if quoted is not None:
        return name.group().lower(), re.sub(r"\\(.)", r"\1", quoted.group(1)), quoted.end()
    token = _TOKEN.match(text, vpos)
    if token is None:
        return None  # `name=` then nothing, or `=`: the padding of a token68
    return name.group().lower(), token.group(), token.end()


def parse(value: str) -> list[Challenge]:
    """Every challenge of a `WWW-Authenticate` value; what cannot be parsed is skipped."""
    challenges: list[Challenge] = []
    pos = 0
    while pos < len(value):
        pos = _SPACE_OR_COMMA.match(value, pos).end()  # type: ignore[union-attr]
        if pos >= len(value):
            break
        if challenges:
            param = _param_at(value, pos)
            if param is not None:
                challenges[-1].params[param[0]] = param[1]
                pos = param[2]
                continue
        scheme = _TOKEN.match(value, pos)
        if scheme is None:
            pos += 1  # stray character: skip it
            continue
        challenge = Challenge(scheme.group())
        challenges.append(challenge)
        pos = _SPACE.match(value, scheme.end()).end()  # type: ignore[union-attr]
        if _param_at(value, pos) is None:
            token68 = _TOKEN68.match(value, pos)
            if token68 is not None and value[token68.end() : token68.end() + 1] in ("", ",", " "):
                challenge.token68 = token68.group()
                pos = token68.end()
    return challenges


def format_all(challenges: list[Challenge]) -> str:
    return ", ".join(str(c) for c in challenges)


def bearer(
    resource_metadata: str,
    *,
    error: str | None = None,
    description: str | None = None,
    scope: str | None = None,
) -> str:
    """The gateway's own Bearer challenge (RFC 6750 §3, RFC 9728 §5.1)."""
    params: dict[str, str] = {}
    if error is not None:
        params["error"] = error
    if description is not None:
        params["error_description"] = description
    if scope:
        params["scope"] = scope
    params["resource_metadata"] = resource_metadata
    return str(Challenge("Bearer", params))


def rewrite(value: str | None, resource_metadata: str) -> str:
    """An upstream's challenge as the gateway passes it on: every Bearer challenge
    points at the gateway's own protected-resource metadata (added when absent);
    everything else (error, scope, realm, other schemes) is kept."""
    challenges = parse(value or "")
    if not any(c.is_bearer for c in challenges):
        challenges.insert(0, Challenge("Bearer"))
    for challenge in challenges:
        if challenge.is_bearer:
            challenge.token68 = None
            challenge.params["resource_metadata"] = resource_metadata
    return format_all(challenges)


def param(value: str | None, name: str) -> str | None:
    """A parameter of the first Bearer challenge in ``value``."""
    for challenge in parse(value or ""):
        if challenge.is_bearer:
            return challenge.params.get(name.lower())
    return None
