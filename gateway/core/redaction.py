"""The one redaction rule: what is never shown in a log line, a console page, a trace
or a message to a person, and how a URL is written for them.

A key is secret when its name, lower-cased with every separator dropped (so
``accessToken``, ``access-token``, ``ACCESS_TOKEN`` and ``access.token`` are one
name), contains one of :data:`SECRET_PARTS` or is one of :data:`SECRET_NAMES` (short
names that would match too much as parts, and the sealed states of every revision:
``requestState``, ``_mcp_state``); a state the gateway sealed is replaced wherever it
stands in a text too.  A URL is written without its user info and with
every query value and the fragment replaced, whatever else is wrong with it.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "REDACTED",
    "is_secret_key",
    "redact",
    "safe_command",
    "safe_url",
    "scrub",
]

REDACTED = "[redacted]"
# A key whose normal form contains one of these is secret.
SECRET_PARTS = (
    "token",
    "secret",
    "passw",
    "passphrase",
    "apikey",
    "authoriz",
    "authentic",
    "cookie",
    "credential",
    "privatekey",
    "accesskey",
    "signingkey",
    "encryptionkey",
    "signature",
    "bearer",
    "jwt",
    "sessionkey",
    "statekey",
    "otp",
)
# A key whose normal form is one of these is secret (as parts they would match words
# like "author", "keyboard" or "estate").
SECRET_NAMES = frozenset(
    {
        "auth",
        "key",
        "pwd",
        "pass",
        "sig",
        "pin",
        "state",
        "mcpstate",
        "requeststate",
        "sealedstate",
        "mcpanswers",
        "xapikey",
        "dsn",
    }
)
_SEPARATORS = re.compile(r"[^0-9a-z]+")
# Free text cut into words and the white space between them (kept as it was).
_WORDS = re.compile(r"(\s+)")
# What starts a URL's scheme inside a word, and what ends a sentence after a URL.
_SCHEME_START = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*$")
_TRAILING = "'\"`<>()[]{},.;:!"
# A state the gateway sealed for a client (gateway.bridge.state's PREFIX, then its
# base64url token): a client of an era before elicitation gets it inside a result's text.
_SEALED = re.compile(r"\bgw1\.[A-Za-z0-9_\-.]{16,}")
# A host written with user info but no scheme ("u:PW@host:port", as some errors do).
_USERINFO = re.compile(r"(?<![\w/])[^\s/@:'\"]+:[^\s/@'\"]*@(?=[\w\[])")


def normal_key(key: object) -> str:
    """The key as the rule compares it: lower case, no separators."""
    return _SEPARATORS.sub("", str(key).lower())


# A key whose normal form ends in one of these is secret (OPENAI_KEY, DB_PASS, GH_PAT,
# SENTRY_DSN, x-auth-key): over-redacting a "monkey" is the cheaper mistake.
SECRET_ENDINGS = ("key", "pass", "pat", "dsn")


def is_secret_key(key: object) -> bool:
    """Whether a value under this key (a JSON member, a header, a log field) is secret."""
    name = normal_key(key)
    return (
        name in SECRET_NAMES
        or any(part in name for part in SECRET_PARTS)
        or name.endswith(SECRET_ENDINGS)
    )


def redact(value: Any) -> Any:
    """A copy of a JSON-like value with every secret key's value replaced and every URL
    in a string written as :func:`safe_url` writes it."""
    if isinstance(value, dict):
        return {
            key: REDACTED if is_secret_key(key) else redact(item) for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return scrub(value)
    return value


def safe_url(url: object) -> str:
    """``url`` for a person: no user info, every query value and the fragment replaced.
    Never raises, whatever the text (a URL that does not parse is treated as text)."""
    text = str(url)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return _USERINFO.sub("", text)
    # User info first: a password may hold a raw '?' or '#' (a URL that does not
    # parse is the one whose error repeats it); everything to the authority's last '@'.
    # A raw '/' in it ends the authority early: with a ':' there (a password, or a
    # port) everything to the last '@' at all is hidden; when a '?' or '#' comes
    # before that '@', what follows may be a query value's tail: all of it is hidden
    # (over-hiding is cheaper).
    authority, slash, path = rest.partition("/")
    hidden = ""
    if ":" in authority and "@" in path:
        before, _, after = path.rpartition("@")
        if "?" in before or "#" in before:
            return f"{scheme}://{REDACTED}"
        authority, slash, path, hidden = after, "", "", REDACTED + "@"
    elif "@" in authority:
        authority = authority.rpartition("@")[2]
    rest = authority + slash + path
    rest, _, fragment = rest.partition("#")
    rest, question, query = rest.partition("?")
    out = f"{scheme}://{hidden}{rest}"
    if question:
        out += "?" + "&".join(_no_value(item) for item in query.split("&"))
    if fragment:
        out += "#" + REDACTED
    return out


def _no_value(item: str) -> str:
    name, eq, _ = item.partition("=")
    return f"{name}={REDACTED}" if eq else name


def scrub(text: str) -> str:
    """Free text (an error message, a reason) with every URL in it made safe: each
    word holding ``://`` from its scheme on (quotes and a sentence's punctuation
    around it kept), and any ``user:password@`` left."""
    if "gw1." in text:
        text = _SEALED.sub(REDACTED, text)
    if "://" not in text and "@" not in text:
        return text
    if "://" in text:
        text = "".join(_safe_word(word) if "://" in word else word for word in _WORDS.split(text))
    return _USERINFO.sub("", text) if "@" in text else text


def _safe_word(word: str) -> str:
    at = word.index("://")
    scheme = _SCHEME_START.search(word[:at])
    start = scheme.start() if scheme is not None else at
    body = word[start:]
    end = max(len(body.rstrip(_TRAILING)), at - start + 3)  # never into the "://"
    return word[:start] + safe_url(body[:end]) + body[end:]


def safe_command(argv: list[str]) -> list[str]:
    """A command line for a person: a secret option's value (``--api-key=V``, or
    ``--token V``) replaced, every URL made safe."""
    shown: list[str] = []
    secret_next = False
    for arg in argv:
        name, eq, _ = arg.partition("=")
        flag = arg.startswith("-") and is_secret_key(name.lstrip("-"))
        if secret_next and not arg.startswith("-"):
            shown.append(REDACTED)
        elif flag and eq:
            shown.append(f"{name}={REDACTED}")
        else:
            shown.append(scrub(arg))
        secret_next = flag and not eq
    return shown
