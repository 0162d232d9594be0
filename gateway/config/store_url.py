"""The cluster store's URL (``--cluster``), checked with the settings: ``check`` and
``serve`` refuse the same mistakes, in one line that never repeats the URL (it may
hold the store's password), before anything connects to it."""

from __future__ import annotations

from urllib.parse import urlsplit

from gateway.core.store_urls import CLUSTER_SCHEMES, SENTINEL_SCHEMES, ClusterUrl, SentinelUrl

REDIS = ("redis://", "rediss://", "unix://", "valkey://")
EXPECTED = (
    "expected redis://HOST:PORT/DB, redis+sentinel://HOST:PORT[,HOST:PORT]/SERVICE, "
    "redis+cluster://HOST:PORT[,HOST:PORT] (or file:///DIR on one machine)"
)
RAW_USER_INFO = (
    "its user info holds a raw '/' (or runs past one): percent-encode the password "
    "('/' as %2F, '@' as %40, ':' as %3A)"
)


def store_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as a cluster store, or None."""
    if url == "memory:" or url.startswith("file://"):
        return None
    if not url.startswith((*REDIS, *SENTINEL_SCHEMES, *CLUSTER_SCHEMES)):
        return EXPECTED
    whole = url.partition("://")[2]
    rest = whole.partition("?")[0]
    authority, _, path = rest.partition("/")
    if "@" in path and (authority or not url.startswith("unix://")):
        return RAW_USER_INFO
    if url.startswith((*SENTINEL_SCHEMES, *CLUSTER_SCHEMES)) and ("?" in whole or "#" in whole):
        return (
            "a Sentinel or cluster URL takes no ?options or #fragment "
            "(a raw '?' or '#' in the password: percent-encode it)"
        )
    if url.startswith((*SENTINEL_SCHEMES, *CLUSTER_SCHEMES)):
        try:  # read as the store reads it
            (SentinelUrl if url.startswith(SENTINEL_SCHEMES) else ClusterUrl).parse(url)
        except ValueError as exc:
            return str(exc)
        return None
    if url.startswith("unix://"):
        return None if path else "expected unix:///PATH/TO/redis.sock"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - read for its check: a port that is no number raises
    except ValueError:
        return "its host or port does not parse (expected redis://HOST:PORT/DB)"
    if not parts.hostname:
        return "it names no host (expected redis://HOST:PORT/DB)"
    db = parts.path.strip("/")
    return None if not db or db.isdigit() else "its DB is a number: redis://HOST:PORT/DB"
