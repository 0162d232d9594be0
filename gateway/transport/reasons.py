"""What a client hears when the upstream fails: what went wrong, naming the route and
the request id, never the upstream's address, command or the socket or TLS library's
words.  The whole detail goes on the gateway's log line of the call (its ``reason``
field), under the same request id."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

import structlog

from gateway.core import Failure, FailureKind
from gateway.core.log_context import request_field
from gateway.protocol.upstream_failures import TABLE as UPSTREAM_FAILURES
from gateway.protocol.upstream_failures import told

# The kinds whose message may carry the upstream side's words (a carrier's error),
# and what each means for the call: their one table.
UPSTREAM_KINDS = frozenset(UPSTREAM_FAILURES)
# The kinds whose carrier words say something a person can act on (refused, reset,
# the TLS handshake, a host name), said as what they mean.
_DETAILED = frozenset(
    {FailureKind.UPSTREAM_UNAVAILABLE, FailureKind.UPSTREAM_LOST, FailureKind.UPSTREAM_TIMEOUT}
)
# The route's own bounds, in the gateway's words: which one a call ran into.
# The route's own bounds, in the gateway's words at the start of a carrier's message
# (matched there only: an upstream's or a child's words later on are not looked at).
_OWN_LIMIT = re.compile(
    r"(?:the upstream's answer was lost: |the upstream did not answer in time: "
    r"|the upstream answered HTTP \d{3}: )?"
    r"(?:(?P<timeout>no answer within the route's timeout of [\d.]+ s"
    r"|the client's answers took longer than the route's ask_timeout of [\d.]+ s)"
    r"|(?:the upstream's answer \(\d+ bytes\) exceeds the route's bound"
    r"|upstream body(?: of \d+ bytes)? exceeds the limit|SSE event exceeds the limit)"
    r" of (?P<bytes>\d+))"
)
# The kinds whose detail is the upstream's HTTP status.
_STATUS_SAID = frozenset({FailureKind.UPSTREAM_REFUSED, FailureKind.UPSTREAM_CREDENTIALS})
_URL = re.compile(r"\b(?:https?|wss?)://[^\s'\",;)]*")
_HOST_PORT = re.compile(r"\b(?:\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]|localhost):\d+\b")
# A library's own words: past one of these the text is not the gateway's.
_LIBRARY = re.compile(
    r"Errno|SSL|ssl:|Cannot connect to host|Connect call failed|[A-Z][A-Za-z]+(?:Error|Exception)\b"
)
# What a library's words mean, for the client: the first that matches.
_MEANINGS = (
    (
        re.compile(r"stdio server is gone|stdio server is not running", re.I),
        "its process had exited",
    ),
    # Before "Cannot connect": aiohttp says that of a failed look-up or certificate too
    # (and "ssl:default" of every connection, so TLS is told by its own words).
    (
        re.compile(r"Name or service|nodename nor servname|name resolution|resolve", re.I),
        "the host name did not resolve",
    ),
    (
        re.compile(r"SSLError|SSLCertVerification|CERTIFICATE|certificate|WRONG_VERSION|TLS"),
        "the TLS handshake failed",
    ),
    (re.compile(r"refused|Connect call failed|Cannot connect", re.I), "connection refused"),
    (re.compile(r"reset", re.I), "the connection was reset"),
    (re.compile(r"exited with code", re.I), "its process exited"),
    (re.compile(r"closed|disconnected|EOF|Connection lost", re.I), "the connection was closed"),
    (re.compile(r"timed? ?out", re.I), "timed out"),
    (re.compile(r"No such file|not found", re.I), "its command could not be started"),
)
# What was wrong with an answer the gateway could not use, in the gateway's own words
# (never the upstream's, which may name its hosts, files or secrets): the first found.
# The gateway's own words for an upstream that asked past the route's bounds.
_ASKED_TOO_MUCH = re.compile(
    r"the upstream asked (\d+ questions at once \(questions_at_once=\d+\)"
    r"|over \d+ questions in one call \(questions_per_call\)"
    r"|for input more than \d+ times)$"
)
_REDIRECT = re.compile(r"the upstream of (?:route \S+|the route) answered HTTP (\d{3})\b")
_UNUSABLE = (
    ("not JSON", "its answer is not JSON"),
    ("without a result", "its answer has no result"),
    ("malformed error", "its error is malformed"),
    ("without answering", "it ended the exchange without answering"),
    ("unknown resultType", "a resultType this revision does not know"),
    ("speaks no MCP transport", "no MCP transport answered"),
)


_calls_log = structlog.get_logger("gateway.calls")


def log_refusal(route: str, status: int, failure: Failure) -> None:
    """One ``refused`` log event for a message turned away before any call ran (no
    ``call`` line comes for it), so that every answer names a request id the log
    names too.  The client's fault (4xx) at info, the gateway's (5xx) a warning."""
    record = {"route": route, "status": status, "kind": failure.kind.value}
    if status >= 500:
        _calls_log.warning("refused", reason=failure.message, **record)
    else:
        _calls_log.info("refused", reason=failure.message, **record)


def request_id() -> str:
    """The id the current request's log lines carry."""
    return request_field("request_id") or "-"


def without_internals(text: str, hidden: Iterable[str]) -> str:
    """``text`` with the upstream's address and command out, and a library's words
    replaced by what they mean."""
    for word in hidden:
        if word:
            text = text.replace(word, "the upstream")
    text = _HOST_PORT.sub("the upstream", _URL.sub("the upstream", text))
    library = _LIBRARY.search(text)
    if library is None:
        return text
    meaning = next((m for pattern, m in _MEANINGS if pattern.search(text)), "")
    kept = text[: library.start()].rstrip(" :,([")
    return f"{kept} ({meaning})" if meaning else kept


def for_client(failure: Failure, route: str, hidden: Iterable[str]) -> Failure:
    """``failure`` as the client may see it (unchanged unless it is the upstream's):
    what went wrong in the gateway's words (the upstream's own, its address or
    command, stay in the log), then what it means for the call (whether it may have
    run, whether to send it again: the one table)."""
    meaning = UPSTREAM_FAILURES.get(failure.kind)
    if meaning is None:
        return failure
    said = told(meaning, _detail(failure, hidden))
    headers = dict(failure.headers)
    data = None
    if meaning.retry_after is not None:
        headers.setdefault("Retry-After", str(meaning.retry_after))
        # Said in the message's own words too, for clients that never see the header
        # (stdio, a JSON-RPC error at HTTP 200).
        data = {"retryAfterSeconds": _seconds(headers["Retry-After"])}
    else:
        headers.pop("Retry-After", None)  # no advice where sending again could run it twice
    return replace(
        failure,
        message=f"route {route}: {said} (request id {request_id()})",
        data=data,
        headers=headers,
    )


def _detail(failure: Failure, hidden: Iterable[str]) -> str:
    """What a person can act on beyond the headline: the upstream's HTTP status, or
    what the carrier's (or a library's) words mean; "" when nothing is known."""
    status = failure.data.get("status") if isinstance(failure.data, dict) else None
    if failure.kind in _STATUS_SAID and isinstance(status, int):
        return f"HTTP {status}"
    text = without_internals(failure.message, hidden)
    own = _OWN_LIMIT.match(text)  # a bound of the route's own: said, it can be acted on
    if failure.kind is FailureKind.UPSTREAM_PROTOCOL and own is None:
        asked = _ASKED_TOO_MUCH.match(text)
        if asked is not None:  # a bound of the route's own on its questions
            return f"it asked {asked.group(1)}"
        redirect = _REDIRECT.match(text)
        if redirect is not None:
            return (
                f"a redirect (HTTP {redirect.group(1)}) the route does not follow:"
                " redirects=same-origin follows 307/308 on the upstream's own origin"
            )
        if isinstance(status, int) and not 200 <= status < 300:
            return f"HTTP {status}"
        return next((said for words, said in _UNUSABLE if words in text), "")
    if failure.kind not in _DETAILED | {FailureKind.UPSTREAM_PROTOCOL}:
        return ""
    if own is not None:
        if own.group("bytes"):
            return f"larger than the route's max_message of {own.group('bytes')} bytes"
        return own.group("timeout")
    if failure.kind is FailureKind.UPSTREAM_TIMEOUT:
        return ""  # (the headline says it all)
    return next((m for pattern, m in _MEANINGS if pattern.search(text)), "")


def _seconds(value: str) -> int:
    """A ``Retry-After`` of whole seconds (ASCII digits, a sane length) as a number;
    anything else (an HTTP date, other scripts' digits) as the default 5."""
    if value.isascii() and value.isdigit() and len(value) <= 9:
        return int(value)
    return 5
