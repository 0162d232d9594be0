"""`Mcp-Param-{Name}` headers (2026-07-28, SEP-2243): which tool arguments a tool
declares as headers (`x-mcp-header`), and whether a request's headers mirror them.

Plain functions of the wire rules, for the revision's adapter."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from typing import Any

TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
SAFE_INTEGER = 2**53 - 1


def param_paths(tool: dict[str, Any]) -> dict[tuple[str, ...], str] | None:
    paths: dict[tuple[str, ...], str] = {}
    seen: set[str] = set()
    for path, prop in header_annotations(tool.get("inputSchema") or {}):
        name = prop.get("x-mcp-header")
        if path is None or not path or not isinstance(name, str) or not TOKEN.match(name):
            return None
        if name.lower() in seen or prop.get("type") not in ("string", "integer", "boolean"):
            return None
        seen.add(name.lower())
        paths[path] = name
    return paths


def header_annotations(
    schema: Any, path: tuple[str, ...] | None = ()
) -> Iterator[tuple[tuple[str, ...] | None, Any]]:
    """Every `x-mcp-header` anywhere in a schema, with its path if that path is a
    chain of `properties` keys from the root (None otherwise)."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "x-mcp-header":
                yield path, schema
            elif key == "properties" and isinstance(value, dict) and path is not None:
                for name, sub in value.items():
                    yield from header_annotations(sub, (*path, name))
            else:
                yield from header_annotations(value, None)
    elif isinstance(schema, list):
        for item in schema:
            yield from header_annotations(item, None)


def mirrored(value: Any) -> bool:
    """An argument value a client mirrors into its header (absent and null are not)."""
    return isinstance(value, str | bool) or (
        isinstance(value, int | float) and float(value).is_integer()
    )


def strict_header_value(header: str) -> str | None:
    """A header's value, decoded when wrapped; None when it holds characters a header
    may not (RFC 9110: visible ASCII, space, tab) or the Base64 is malformed."""
    value = header.strip(" \t")
    if any(not (0x20 <= ord(c) <= 0x7E or c == "\t") for c in value):
        return None
    if not (value.startswith("=?base64?") and value.endswith("?=")) or len(value) < 11:
        return value
    try:
        return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def same_value(text: str, value: Any) -> bool:
    """A decoded header against its argument: integers compare as numbers."""
    if isinstance(value, bool):
        return text == ("true" if value else "false")
    if isinstance(value, int | float):
        try:
            return float(text) == float(value)
        except ValueError:
            return False
    return isinstance(value, str) and text == value


def param_header_mismatch(
    declared: dict[tuple[str, ...], str], arguments: Any, headers: Mapping[str, str]
) -> str | None:
    """What is wrong with the declared `Mcp-Param-*` headers (``headers`` by lower-case
    name) against the call's arguments: each present exactly when its argument has a
    value, well-formed, and equal to it once decoded.  None: nothing."""
    for path, name in declared.items():
        value: Any = arguments  # not an object: no value at any path
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        header = headers.get(name.lower())
        where = "arguments." + ".".join(path)
        if header is None:
            if mirrored(value):
                return f"the Mcp-Param-{name} header is required ({where} is set)"
            continue
        text = strict_header_value(header)
        if text is None:
            return f"Mcp-Param-{name} is not a valid header value"
        if not mirrored(value) or not same_value(text, value):
            return f"Mcp-Param-{name} does not match {where}"
    return None
