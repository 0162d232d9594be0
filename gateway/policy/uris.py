"""One canonical form of a resource URI, for matching a route's resource rules.

A rule names URIs, and an upstream resolves them: a file server decodes the
path, resolves ``..`` and ignores a doubled ``/``, so ``file:///public/../secret``
and ``FILE:///%73ecret`` are ``file:///secret`` to it.  Were the rule matched
against the URI as written, every other spelling of a hidden resource would pass.
So the rule's patterns and the request's URI are both brought to one form before
they are compared (RFC 3986 section 6 normalisation, as a server resolves it):

- surrounding white space trimmed; scheme and host lower-cased; the host
  ``localhost`` emptied (``file://localhost/x`` is ``file:///x``);
- the path percent-decoded, dot segments removed (section 5.2.4), runs of ``/``
  made one;
- the query and the fragment kept as written.

A URI whose form is ambiguous, that one server may resolve one way and another
another, has no canonical form (None) and is refused on a route with a resources
rule: an encoded ``/`` or ``\\`` in the path, a backslash, a ``..`` left over, a
control character, or an encoding that is not UTF-8.  Only matching uses the
canonical form: what goes upstream is the client's URI as written.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

# Encoded separators: decoded, they would split a segment the server may not split.
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c)", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SLASHES = re.compile(r"/{2,}")
# Hosts that name this machine in a file URI (RFC 8089: the same as none).
_LOCAL_HOSTS = frozenset({"localhost"})


def canonical_uri(uri: str) -> str | None:
    """``uri`` in the one form rules are matched in; None: ambiguous, refuse it."""
    text = uri.strip()
    if _CONTROL.search(text) or "\\" in text:
        return None
    try:
        parts = urlsplit(text)
    except ValueError:  # a malformed authority (an unclosed IPv6 bracket, say)
        return None
    if _ENCODED_SEPARATOR.search(parts.path):
        return None
    try:
        path = unquote(parts.path, errors="strict")
    except UnicodeDecodeError:
        return None
    if _CONTROL.search(path) or "\\" in path:
        return None
    resolved = _remove_dots(_SLASHES.sub("/", path))
    if resolved is None:
        return None
    try:
        return urlunsplit(_rebuilt(parts, resolved))
    except ValueError:  # a port that is not a number
        return None


def _rebuilt(parts: SplitResult, path: str) -> SplitResult:
    host = (parts.hostname or "").lower()
    if host in _LOCAL_HOSTS and parts.scheme.lower() == "file":
        host = ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    if parts.username is not None:
        userinfo = parts.username + (f":{parts.password}" if parts.password is not None else "")
        netloc = f"{userinfo}@{netloc}"
    return SplitResult(parts.scheme.lower(), netloc, path, parts.query, parts.fragment)


def _remove_dots(path: str) -> str | None:
    """RFC 3986 section 5.2.4 on ``path``; None when a ``..`` would climb above a
    relative path's start (nothing to resolve it against)."""
    absolute = path.startswith("/")
    out: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                out.append("")
            continue
        if segment == "..":
            if len(out) > (1 if absolute else 0):
                out.pop()
            elif not absolute:
                return None
            if last:
                out.append("")
            continue
        out.append(segment)
    return "/".join(out)
