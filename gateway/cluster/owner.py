"""Whose is a request: the replica named in its session id or its sealed state.

A session id minted in cluster mode is ``<replica id>.<random>`` (the random
part never holds a dot); a parked call's ``requestState`` carries the owner as
a sealed claim (``o``); a task the gateway runs for a client has the id
``gwtask.<replica id>.<upstream id>``.  Nothing else needs a lookup table.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from gateway.bridge.state import StateSealer
from gateway.bridge.tasks import TASK_MARK

SEPARATOR = "."
# The sealed-state kind of a call parked on its replica (see the forwarder).
PARKED = "parked"


def session_prefix(replica_id: str) -> str:
    return replica_id + SEPARATOR


def session_owner(session_id: str | None) -> str | None:
    if not session_id or SEPARATOR not in session_id:
        return None
    owner = session_id.split(SEPARATOR, 1)[0]
    return owner or None


def _tokens(params: Any) -> Iterator[str]:
    """Sealed states in a request's params, or in its arguments (where revisions that
    carry asks in arguments put them)."""
    if not isinstance(params, dict):
        return
    for source in (params, params.get("arguments")):
        if isinstance(source, dict):
            for value in source.values():
                if StateSealer.is_ours(value):
                    yield value


def parked_owner(raw: bytes, sealer: StateSealer) -> str | None:
    """The replica holding the parked call a POST body resumes, if it resumes one."""
    if b"gw1." not in raw:
        return None  # the common case: nothing sealed in it, no parsing
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    messages = body if isinstance(body, list) else [body]
    for message in messages:
        if not isinstance(message, dict):
            continue
        for token in _tokens(message.get("params")):
            claims = sealer.peek(token)
            if claims is not None and claims.get("k") == PARKED:
                owner = claims.get("o")
                return owner if isinstance(owner, str) else None
    return None


def task_owner(raw: bytes) -> str | None:
    """The replica holding the task a POST body names, if it names one: any of its
    params that is a task id the gateway minted (whatever a revision calls the field)."""
    if TASK_MARK.encode() not in raw:
        return None  # the common case: no parsing
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    for message in body if isinstance(body, list) else [body]:
        params = message.get("params") if isinstance(message, dict) else None
        for value in params.values() if isinstance(params, dict) else ():
            if isinstance(value, str) and value.startswith(TASK_MARK):
                owner = value[len(TASK_MARK) :].split(SEPARATOR, 1)[0]
                if owner:
                    return owner
    return None
