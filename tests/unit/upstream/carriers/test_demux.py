"""Demux: one shared upstream channel's messages sorted out to their requests."""

from __future__ import annotations

from typing import Any

import structlog

from gateway.protocol import SUBSCRIPTION_ID
from gateway.upstream.calls import listen_named
from gateway.upstream.carriers.demux import Demux, DropOldestQueue

LOG = structlog.get_logger("test")


def request(key: int, method: str = "tools/call", token: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": key, "method": method, "params": params}


def note(method: str, meta: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "method": method, "params": params}


def held(queue: DropOldestQueue) -> list[dict[str, Any]]:
    return list(queue._items)  # type: ignore[attr-defined]


def test_a_calls_log_reaches_it_while_a_listen_is_open() -> None:
    demux = Demux(16, "test", LOG, listen_named)
    _, listen = demux.register(request(1, "subscriptions/listen"), listen=True)
    _, call = demux.register(request(2))
    log = note("notifications/message", level="info", data="working")
    demux.route(log)
    assert held(call) == [log] and held(listen) == []
    assert len(demux.unsolicited) == 0


def test_a_listens_notifications_follow_its_subscription_id() -> None:
    demux = Demux(16, "test", LOG, listen_named)
    _, listen = demux.register(request(1, "subscriptions/listen"), listen=True)
    _, call = demux.register(request(2))
    update = note("notifications/resources/updated", {SUBSCRIPTION_ID: 1}, uri="x:/a")
    demux.route(update)
    assert held(listen) == [update] and held(call) == []


def test_two_calls_and_no_clue_go_unsolicited() -> None:
    demux = Demux(16, "test", LOG, listen_named)
    _, first = demux.register(request(1))
    _, second = demux.register(request(2, token="t2"))
    log = note("notifications/message", level="info", data="whose?")
    demux.route(log)
    assert held(first) == [] and held(second) == [] and len(demux.unsolicited) == 1
    progress = note("notifications/progress", progressToken="t2", progress=1)
    demux.route(progress)
    assert held(second) == [progress]


def test_an_answered_listen_no_longer_counts() -> None:
    demux = Demux(16, "test", LOG, listen_named)
    demux.register(request(1, "subscriptions/listen"), listen=True)
    _, call = demux.register(request(2))
    demux.route({"jsonrpc": "2.0", "id": 1, "result": {}})
    assert demux.listens == set()
    log = note("notifications/message", level="info", data="mine")
    demux.route(log)
    assert held(call) == [log]


def test_without_a_namer_no_message_names_a_listen() -> None:
    # The carriers know no revision's tags: only the namer their user passes reads them.
    demux = Demux(16, "test", LOG)
    _, listen = demux.register(request(1, "subscriptions/listen"), listen=True)
    _, call = demux.register(request(2))
    update = note("notifications/resources/updated", {SUBSCRIPTION_ID: 1}, uri="x:/a")
    demux.route(update)
    assert held(listen) == [] and held(call) == [] and held(demux.unsolicited) == [update]
