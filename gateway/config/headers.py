"""A route's static upstream headers (``headers_from_env``, ``headers_from_file``) as
HTTP can carry them: checked once, when the settings are, for `check` and `serve`
alike; an error names the header and where its value came from, never the value."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from yarl import URL


class HeaderError(ValueError):
    """A static header that no request could carry; ``str()`` is one line."""


# An HTTP header name (RFC 9110's token).
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def header_value(where: str, name: str, value: str) -> str:
    """A static upstream header's value, or HeaderError naming the header (never the
    value): a name that is no HTTP token, a value with a control character (CR or LF
    would start a header of its own) or outside Latin-1."""
    if not _TOKEN.fullmatch(name):
        raise HeaderError(f"{where}: {name[:60]!r} is not an HTTP header name")
    if any((ord(c) < 0x20 and c != "\t") or 0x7F <= ord(c) < 0xA0 or ord(c) > 0xFF for c in value):
        raise HeaderError(
            f"{where}: the value holds a control character (CR, LF, NUL, ...) or a character"
            " an HTTP header cannot carry"
        )
    return value


def static_headers(
    route: str,
    from_env: Mapping[str, str],
    from_file: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The route's static upstream headers, read from the environment (default: this
    process's) and files now."""
    environ = os.environ if environ is None else environ
    headers: dict[str, str] = {}
    for header, variable in from_env.items():
        where = f"route {route}: headers_from_env.{header}"
        value = environ.get(variable)
        if value is None:
            raise HeaderError(f"{where}: environment variable {variable} is not set")
        headers[header] = header_value(where, header, value)
    for header, file in from_file.items():
        where = f"route {route}: headers_from_file.{header}"
        try:
            text = Path(file).read_bytes().decode("utf-8").strip()
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise HeaderError(f"{where}: cannot read {file}: {reason}") from None
        except UnicodeDecodeError:
            raise HeaderError(f"{where}: {file} is not UTF-8 text") from None
        headers[header] = header_value(where, header, text)
    return headers


def introspection_header(route: str, variable: str, environ: Mapping[str, str] | None) -> str:
    """The Authorization for a route's introspection endpoint, read from ``variable``
    now as a static header is (its errors name the option it comes from)."""
    try:
        return static_headers(route, {"Authorization": variable}, {}, environ)["Authorization"]
    except HeaderError as exc:
        said = str(exc).replace("headers_from_env.Authorization", "auth_introspection_auth_env")
        raise HeaderError(said) from None


def credentials_from(
    from_env: Mapping[str, str], from_file: Mapping[str, str], url: str = ""
) -> str:
    """Where the Authorization a route sends upstream comes from ("headers_from_env
    UPSTREAM_AUTH", or its URL's user info), if it sends one itself; else ""."""
    for option, mapping in (("headers_from_env", from_env), ("headers_from_file", from_file)):
        for header, source in mapping.items():
            if header.lower() in ("authorization", "proxy-authorization"):
                return f"{option} {source}"
    return "the user info of its URL" if has_user_info(url) else ""


def has_user_info(url: str) -> bool:
    """Whether an upstream URL carries user info that goes as Basic credentials (read
    as the HTTP client reads it: ``http://@host`` sends none)."""
    try:
        parsed = URL(url)
    except ValueError:
        return False  # not a URL the route accepts: its own check says so
    return parsed.user is not None or parsed.password is not None


def set_upstream(
    from_env: Mapping[str, str], from_file: Mapping[str, str], urls: Sequence[str]
) -> set[str]:
    """The headers (lower case) a route sets upstream itself, which no client's may
    replace: its static headers, and Authorization where a URL carries user info.
    Raises ValueError for an Authorization set both ways (no request can carry both)."""
    static = {name.lower() for name in (*from_env, *from_file)}
    with_info = [has_user_info(url) for url in urls]
    if any(with_info) and not all(with_info):
        # Its targets are one server: one's credentials are every one's (a target left
        # without would get neither them nor the client's).
        raise ValueError("user info on some of the route's URLs only: give it on all or none")
    if any(with_info):
        if "authorization" in static:
            raise ValueError(
                "an upstream URL with user info sends its own Authorization: set it either "
                "there or by headers_from_env/headers_from_file, not both"
            )
        static.add("authorization")
    return static
