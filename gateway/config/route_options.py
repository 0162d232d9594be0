"""The one table of route options.

`serve --help`, the unknown-option error of a ``--route`` (with "Did you mean"),
the TOML keys of a ``[[routes]]`` table and docs/reference/route-options.md
(``python -m gateway.config.route_options``) are all made from :data:`OPTIONS`; a test
keeps it and :class:`gateway.config.settings.RouteSpec`'s fields the same set.
"""

from __future__ import annotations

import difflib
import shlex
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from gateway.core.redaction import safe_command, safe_url


class Kind(Enum):
    """How a ``--route`` writes the value (TOML takes the typed value itself)."""

    SCALAR = "scalar"
    LIST = "list"  # a|b|c -> ["a", "b", "c"]
    MAPPING = "mapping"  # NAME:VALUE|NAME:VALUE -> {"NAME": "VALUE", ...}
    RULE = "rule"  # allow:P1|P2, later parts without '=' add patterns


@dataclass(frozen=True)
class RouteOption:
    name: str
    value: str  # what the value looks like, for a person
    meaning: str
    default: str = ""
    kind: Kind = Kind.SCALAR


OPTIONS: tuple[RouteOption, ...] = (
    RouteOption("version", "REV", "the upstream's revision; skips the probe", "probed"),
    RouteOption(
        "transport",
        "auto|http|sse",
        "Streamable HTTP, or the old HTTP+SSE transport (the handshake era's only)",
        "auto",
    ),
    RouteOption(
        "timeout",
        "SECONDS",
        "how long one upstream call may take in all (time spent waiting for the client to "
        "answer a question the upstream asked is not counted; a stream the upstream keeps "
        "alive with notifications does not extend it)",
        "300",
    ),
    RouteOption(
        "ask_timeout",
        "SECONDS",
        "how long one call may wait on its client in all (the upstream's questions being "
        "answered, which timeout does not count), and each question at most; past it the "
        "call ends with the revision's timeout error, its open questions are refused and "
        "the upstream is told the call is cancelled",
        "600",
    ),
    RouteOption(
        "keepalive",
        "SECONDS",
        "an open SSE answer to a client (a standalone GET or HTTP+SSE stream, a long "
        "call's answer, a subscriptions/listen) quiet this long gets a comment, so that a "
        "proxy's idle timeout in between (nginx's 60 s) does not cut it; 0 turns it off",
        "the setting keepalive (15)",
    ),
    RouteOption(
        "also",
        "URL|URL",
        "more targets of the same server (HTTP): stateless calls go to the healthy one "
        "with the fewest calls in flight, a session and its calls stay on the target that "
        "opened it; a target that fails 3 times in a row is ejected for a back-off "
        "(2 s, doubling to 60 s) and re-admitted when it answers; with every target out a "
        "call is refused at once with when to try again",
        kind=Kind.LIST,
    ),
    RouteOption(
        "instances",
        "N",
        "a stdio route's targets: N children of the command, as also= is for HTTP",
        "1",
    ),
    RouteOption(
        "health_every",
        "SECONDS",
        "how often each target of a route with several is checked (it answers an MCP "
        "ping in its revision; it speaks the route's protocol era)",
        "5",
    ),
    RouteOption("connect_timeout", "SECONDS", "connecting to the upstream", "10"),
    RouteOption("probe_timeout", "SECONDS", "how long the era probe waits for an answer", "10"),
    RouteOption(
        "headers_from_env",
        "HEADER:ENV_VAR|...",
        "headers sent upstream on every request, each value read from an environment "
        "variable when the gateway starts (a secret never on the command line)",
        kind=Kind.MAPPING,
    ),
    RouteOption(
        "headers_from_file",
        "HEADER:FILE|...",
        "headers sent upstream on every request, each value read from a file",
        kind=Kind.MAPPING,
    ),
    RouteOption(
        "env",
        "NAME:VALUE|...",
        "stdio: environment variables of the upstream's command, added to the gateway's own "
        "(which the command inherits)",
        kind=Kind.MAPPING,
    ),
    RouteOption("cwd", "DIR", "stdio: the working directory of the upstream's command", "."),
    RouteOption(
        "shared",
        "true|false",
        "stdio: one child for every caller of the route instead of one per client session",
        "false",
    ),
    RouteOption(
        "per_principal", "true|false", "accepted for older configurations (the default now)"
    ),
    RouteOption(
        "end_sessions",
        "true|false",
        "end the upstream session (DELETE) when its client's session ends",
        "true",
    ),
    RouteOption(
        "roots",
        "per-client|per-session|shared",
        "a stateless client's roots in front of a handshake-era server: asked only when "
        "the server asks, the session then kept for exactly those roots, learning whether "
        "the server keeps roots per session (per-client); per-session says it does (a call "
        "that may ask is asked for its roots first); shared: the pool's first answer for all",
        "per-client",
    ),
    RouteOption(
        "redirects",
        "none|same-origin",
        "an upstream's HTTP redirect: an error, or followed on its own origin (307/308)",
        "none",
    ),
    RouteOption(
        "questions_at_once",
        "N",
        "requests one call's upstream may have open at once; past it refused",
        "32",
    ),
    RouteOption("questions_per_call", "N", "requests one call's upstream may send in all", "256"),
    RouteOption(
        "max_connections",
        "N",
        "connections the calls to a plain-http upstream keep open at once",
        "1024",
    ),
    RouteOption(
        "max_message",
        "BYTES",
        "the largest message the upstream may send (1024 to 1 GiB)",
        "16 MiB over HTTP, 32 MiB over stdio",
    ),
    RouteOption(
        "ttl_ms", "N", "ttlMs hint given to modern clients when the upstream gives none", "0"
    ),
    RouteOption("cache_scope", "private|public", "cacheScope given to modern clients", "private"),
    RouteOption(
        "allowed_hosts",
        "H1|H2",
        "Host headers accepted besides loopback ones (DNS-rebinding guard)",
        kind=Kind.LIST,
    ),
    RouteOption(
        "allowed_origins",
        "O1|O2",
        "browser Origins accepted besides the route's own",
        kind=Kind.LIST,
    ),
    RouteOption(
        "forward_headers",
        "NAME1|NAME2",
        "client headers passed upstream besides Authorization and trace context",
        kind=Kind.LIST,
    ),
    RouteOption("public_url", "URL", "the route's URL as clients reach it (the OAuth resource)"),
    RouteOption(
        "auth",
        "transparent|gateway",
        "pass the upstream's OAuth through, or check bearer tokens at the gateway",
        "transparent",
    ),
    RouteOption("auth_issuer", "URL", "auth=gateway: who issues tokens"),
    RouteOption("auth_jwks_uri", "URL", "auth=gateway: where the token keys are", "from metadata"),
    RouteOption("auth_scopes", "S1|S2", "auth=gateway: scopes a token must grant", kind=Kind.LIST),
    RouteOption(
        "auth_introspection_url", "URL", "auth=gateway: RFC 7662 endpoint for opaque tokens"
    ),
    RouteOption(
        "auth_introspection_auth_env",
        "ENV_VAR",
        "auth=gateway: the environment variable holding introspection's Authorization",
    ),
    RouteOption(
        "tools",
        "allow:PATTERN|... or deny:PATTERN|...",
        "the tools exposed: glob patterns on names",
        "everything",
        Kind.RULE,
    ),
    RouteOption(
        "prompts", "allow:...|deny:...", "the prompts exposed, likewise", "everything", Kind.RULE
    ),
    RouteOption(
        "resources",
        "allow:...|deny:...",
        "the resources exposed: patterns on URIs and URI templates",
        "everything",
        Kind.RULE,
    ),
    RouteOption(
        "rate", "N/s|N/m|N/h|off", "rate limit of each caller", "the `rate` setting (none)"
    ),
    RouteOption("burst", "N", "the burst of rate", "N of rate"),
    RouteOption(
        "tool_rate",
        "N/s|N/m|N/h|off",
        "rate limit of each caller's calls of each tool",
        "the `tool_rate` setting (none)",
    ),
    RouteOption("tool_burst", "N", "the burst of tool_rate", "N of tool_rate"),
    RouteOption(
        "rate_fallback",
        "open|closed",
        "in a cluster, rate limits while the shared store is unreachable",
        "the setting (open)",
    ),
)

BY_NAME = {option.name: option for option in OPTIONS}
# The keys of a [[routes]] table that are not options of a --route.
ROUTE_KEYS = ("path", "upstream")
QUOTING = (
    "Commas separate options; a comma inside single or double quotes does not "
    "(a stdio command keeps its quotes for its own shell-style split)."
)


def target_problem(stdio: bool, also: bool, instances: int, transport: str) -> str | None:
    """What is wrong with a route's targets and transport together (None: nothing):
    ``stdio``, its upstream is a command; ``also``, it names more URLs."""
    if also and stdio:
        return "also= names more HTTP targets; a stdio route uses instances=N"
    if instances > 1 and not stdio:
        return "instances=N is for a stdio route; an HTTP route uses also=URL|URL"
    if stdio and transport not in ("auto", "stdio"):
        return f"transport={transport} is for an HTTP upstream; a stdio: command speaks stdio"
    if not stdio and transport == "stdio":
        return "transport=stdio needs a stdio:COMMAND upstream, not a URL"
    return None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the nearest known word, or ''."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def help_text() -> str:
    """The `serve --route` help: every option, one phrase each."""
    options = "; ".join(f"{o.name}={o.value}" for o in OPTIONS)
    return (
        "A path of the gateway and the MCP server behind it; repeatable.  Options: "
        f"{options}.  {QUOTING}  Without any route (here, in GATEWAY_ROUTES or in the "
        "config file) the gateway fronts its bundled demo server at /mcp.  Reference: "
        "docs/reference/route-options.md."
    )


def reference() -> str:
    """docs/reference/route-options.md."""
    lines = [
        "# Route options",
        "",
        "<!-- Generated by `python -m gateway.config.route_options >"
        " docs/reference/route-options.md` from gateway/config/route_options.py; a test checks"
        " it is current. -->",
        "",
        "A route is `--route PATH=UPSTREAM[,option=value...]` on the command line, a",
        "`[[routes]]` table (`path`, `upstream` and the same option names as keys) in the",
        "config file, or an entry of `GATEWAY_ROUTES`.  UPSTREAM is an `http(s)://` URL or",
        "`stdio:COMMAND`.  In a `--route`, `|` separates the items of a list and",
        "`NAME:VALUE` pairs of a mapping; in TOML they are arrays and tables.",
        "",
        QUOTING + " For example:",
        "",
        "```sh",
        "gateway serve --route '/t=stdio:mytool \"--dirs=/a,/b\",env=LOG:debug'",
        "gateway serve --route '/api=https://example.com/mcp,headers_from_env=Authorization:API_KEY'",
        "```",
        "",
        "| option | value | meaning | default |",
        "|---|---|---|---|",
    ]
    for o in OPTIONS:
        value = o.value.replace("|", "\\|")
        lines.append(f"| `{o.name}` | `{value}` | {o.meaning} | {o.default} |")
    return "\n".join(lines) + "\n"


def split_outside_quotes(text: str) -> list[str]:
    """``text`` split at the commas outside single or double quotes (quotes kept)."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == ",":
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    if quote:
        raise ValueError(f"unclosed {quote} quote")
    parts.append("".join(current))
    return parts


def unquote(value: str) -> str:
    """A value wholly inside one pair of quotes, without them."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


STDIO = "stdio:"


def shown_route(path: str, rest: str) -> str:
    """A ``--route`` as an error repeats it: its path and upstream, secrets out (a URL's
    user info and query values, a command's secret options); its options are not
    repeated (the error names the one at fault: a value may be a secret)."""
    if not path.startswith("/"):  # no PATH= at all: the whole text is what it names
        return shown_upstream(f"{path}={rest}" if rest else path)
    try:
        upstream, *options = split_outside_quotes(rest)
    except ValueError:  # an unclosed quote: the text as it is, made safe
        upstream, options = rest, []
    return f"{path}={shown_upstream(upstream)}" + (",..." if options else "")


def shown_upstream(upstream: str) -> str:
    """An upstream (URL or stdio:COMMAND) as an error may repeat it: secrets out."""
    if upstream.startswith(STDIO):
        try:
            words = shlex.split(upstream[len(STDIO) :])
        except ValueError:
            words = upstream[len(STDIO) :].split()
        return STDIO + shlex.join(safe_command(words))
    return safe_url(unquote(upstream))


def parse_options(parts: list[str]) -> dict[str, object]:
    """The ``key=value`` parts of a ``--route`` as RouteSpec values (ValueError names
    the first bad one, with the nearest known option)."""
    values: dict[str, object] = {}
    key = ""
    for part in parts:
        if "=" not in part and key in BY_NAME and BY_NAME[key].kind is Kind.RULE:
            values[key] = f"{values[key]}|{unquote(part)}"  # one more pattern of the rule
            continue
        key, eq, raw = part.partition("=")
        option = BY_NAME.get(key)
        if not eq or option is None:
            raise ValueError(  # its name only: the value may be a secret
                f"unknown option {key!r}{did_you_mean(key, BY_NAME)} "
                "(all options: gateway serve --help, docs/reference/route-options.md)"
            )
        values[key] = _value(option, unquote(raw))
    return values


def _value(option: RouteOption, raw: str) -> object:
    if option.kind is Kind.LIST:
        return [item for item in raw.split("|") if item]
    if option.kind is Kind.MAPPING:
        mapping = {}
        for item in filter(None, raw.split("|")):
            name, colon, value = item.partition(":")
            if not colon or not name:
                raise ValueError(f"{option.name}: expected {option.value}, not {item!r}")
            mapping[name] = value
        return mapping
    return raw


if __name__ == "__main__":  # pragma: no cover - the generator
    sys.stdout.write(reference())
