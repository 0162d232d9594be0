"""An interactive client run by a pinned Python SDK interpreter (not by pytest).

``python feeds_client.py URL legacy|modern [AUTHORIZATION]``: connects over Streamable
HTTP (1.x SDKs: the initialize handshake; 2.x: pinned to 2026-07-28), then reads one
JSON command a line from stdin and writes one JSON line to stdout per reply and per
notification it receives, as they come, so a test can drive it step by step:

- ``{"op": "level", "level": L}`` (legacy: ``logging/setLevel``)
- ``{"op": "subscribe", "uri": U}`` (legacy: ``resources/subscribe``)
- ``{"op": "listen", "uris": [...], "lists": bool}`` (modern: ``subscriptions/listen``,
  open until exit; its events come as ``{"listen": kind, "uri": ...}``)
- ``{"op": "call", "name": T, "args": {...}, "log_level": L?}``
- ``{"op": "exit"}``

Replies are ``{"reply": op, "ok": bool, "text"|"error": ...}``; notifications are
``{"event": method, "params": {...}}`` (logs: ``{"event": "notifications/message", ...}``).
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

import anyio

MODERN = "2026-07-28"
LOG_LEVEL_META = "io.modelcontextprotocol/logLevel"


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line, default=str), flush=True)


async def on_log(params: Any) -> None:
    emit({"event": "notifications/message", "params": params.model_dump(mode="json")})


async def on_message(message: Any) -> None:
    root = getattr(message, "root", None)
    method = getattr(root, "method", None)
    if method is None or method == "notifications/message":
        return  # requests and exceptions are the session's business; logs come above
    params = getattr(root, "params", None)
    dumped = params.model_dump(mode="json") if params is not None else {}
    emit({"event": method, "params": dumped})


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def is_error(result: Any) -> bool:
    return bool(getattr(result, "isError", None) or getattr(result, "is_error", None))


async def commands(run: Any) -> None:
    """Each stdin line to ``run`` in turn; EOF or ``exit`` ends the session."""
    while True:
        line = await anyio.to_thread.run_sync(sys.stdin.readline)
        if not line.strip():
            return
        command = json.loads(line)
        if command["op"] == "exit":
            return
        try:
            out = await run(command)
            emit({"reply": command["op"], "ok": True, **(out or {})})
        except Exception as exc:  # reported to the test
            emit({"reply": command["op"], "ok": False, "error": f"{type(exc).__name__}: {exc}"})


async def legacy(url: str, headers: dict[str, str]) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with (
        streamablehttp_client(url, headers=headers) as (read, write, session_id),
        ClientSession(read, write, logging_callback=on_log, message_handler=on_message) as s,
    ):
        init = await s.initialize()
        emit({"ready": init.protocolVersion, "session": session_id()})

        async def run(command: dict[str, Any]) -> dict[str, Any] | None:
            op = command["op"]
            if op == "level":
                await s.set_logging_level(command["level"])
            elif op == "subscribe":
                await s.subscribe_resource(command["uri"])
            elif op == "call":
                result = await s.call_tool(command["name"], command.get("args") or {})
                return {"text": text_of(result), "isError": is_error(result)}
            else:
                raise ValueError(f"unknown op {op}")
            return None

        await commands(run)


async def modern(url: str, headers: dict[str, str]) -> None:
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode=MODERN,
            logging_callback=on_log,
            message_handler=on_message,
        ) as client,
        anyio.create_task_group() as tasks,
    ):
        emit({"ready": client.session.protocol_version})

        async def listen(command: dict[str, Any], ready: anyio.Event) -> None:
            lists = bool(command.get("lists"))
            async with client.listen(
                tools_list_changed=lists,
                prompts_list_changed=lists,
                resources_list_changed=lists,
                resource_subscriptions=command.get("uris") or [],
            ) as sub:
                emit({"honored": str(sub.honored)})
                ready.set()
                async for event in sub:
                    emit({"listen": type(event).__name__, "uri": getattr(event, "uri", None)})

        async def run(command: dict[str, Any]) -> dict[str, Any] | None:
            op = command["op"]
            if op == "listen":
                ready = anyio.Event()
                tasks.start_soon(listen, command, ready)
                with anyio.fail_after(30):
                    await ready.wait()
            elif op == "call":
                level = command.get("log_level")
                meta = {LOG_LEVEL_META: level} if level else None
                result = await client.call_tool(
                    command["name"], command.get("args") or {}, meta=meta
                )
                return {"text": text_of(result), "isError": is_error(result)}
            else:
                raise ValueError(f"unknown op {op}")
            return None

        await commands(run)
        tasks.cancel_scope.cancel()


def main() -> None:
    url, era = sys.argv[1], sys.argv[2]
    headers = {"Authorization": sys.argv[3]} if len(sys.argv) > 3 and sys.argv[3] else {}
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(legacy if era == "legacy" else modern, url, headers)
    emit({"closed": True})


if __name__ == "__main__":
    main()
