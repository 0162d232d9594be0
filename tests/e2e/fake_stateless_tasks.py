"""A 2026-07-28 MCP server with the tasks extension: a small aiohttp app on loopback.

Stateless (no session): ``server/discover`` advertises ``io.modelcontextprotocol/tasks``;
``tools/call slow`` answers a created task (``resultType: "task"``, status
``working``) to a client that declares the extension, which stays ``working`` until
the test calls :meth:`finish`; ``tasks/get`` gives its state (and its result once
completed), ``tasks/cancel`` ends it. A task is known only to the server that made
it: another server answers ``tasks/get`` for it with an error, as two replicas of a
real server without a shared store would. Every request's method is counted in
``seen``.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import orjson
from aiohttp import web

MODERN = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
CAPS = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SLOW = {
    "name": "slow",
    "description": "Runs as a task; finished by the test.",
    "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}},
}


class StatelessTaskServer:
    _names = itertools.count(1)

    def __init__(self) -> None:
        self.name = f"tasks-{next(self._names)}"
        self.tasks: dict[str, dict[str, Any]] = {}
        self.seen: Counter[str] = Counter()
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None

    async def start(self, port: int) -> str:
        app = web.Application()
        app.router.add_post("/mcp", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        # reuse_port: the port is a HeldPort of the test (gateway_proc.HeldPort).
        await web.TCPSite(self._runner, "127.0.0.1", port, reuse_port=True).start()
        return f"http://127.0.0.1:{port}/mcp"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def finish(self, task_id: str) -> None:
        task = self.tasks[task_id]
        word = task.pop("word")
        task.update(status="completed", result={"content": [{"type": "text", "text": word}]})

    async def _handle(self, request: web.Request) -> web.Response:
        message = orjson.loads(await request.read())
        if request.headers.get("MCP-Protocol-Version") != MODERN:
            return _answer(message.get("id"), error=(-32022, "Unsupported protocol version"))
        if "id" not in message:
            return web.Response(status=202)
        method, params = message.get("method"), message.get("params") or {}
        self.seen[method] += 1
        id_ = message["id"]
        if method == "server/discover":
            return _answer(id_, self._discover())
        if method == "tools/list":
            return _answer(id_, {"tools": [SLOW]})
        if method == "tools/call" and params.get("name") == "slow":
            return _answer(id_, self._create(params))
        if method in ("tasks/get", "tasks/cancel"):
            task = self.tasks.get(str(params.get("taskId")))
            if task is None:
                return _answer(id_, error=(-32602, f"{self.name}: no such task"))
            if method == "tasks/cancel":
                task["status"] = "cancelled"
                return _answer(id_, {})
            return _answer(id_, {k: v for k, v in task.items() if k != "word"})
        return _answer(id_, error=(-32601, f"Method not found: {method}"))

    def _discover(self) -> dict[str, Any]:
        return {
            "supportedVersions": [MODERN],
            "capabilities": {"tools": {}, "extensions": {TASKS: {}}},
            "_meta": {SERVER_INFO: {"name": self.name, "version": "0"}},
        }

    def _create(self, params: dict[str, Any]) -> dict[str, Any]:
        declared = ((params.get("_meta") or {}).get(CAPS) or {}).get("extensions") or {}
        word = str((params.get("arguments") or {}).get("word", ""))
        if TASKS not in declared:
            return {"content": [{"type": "text", "text": word}]}
        task_id = f"{self.name}-task-{next(self._ids)}"
        task = {"taskId": task_id, "status": "working", "ttlMs": 60_000, "pollIntervalMs": 50}
        self.tasks[task_id] = {**task, "word": word}
        return {"resultType": "task", **task}


def _answer(
    id_: Any, result: dict[str, Any] | None = None, error: tuple[int, str] | None = None
) -> web.Response:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_}
    if error is not None:
        message["error"] = {"code": error[0], "message": error[1]}
    else:
        message["result"] = {"resultType": "complete", **(result or {})}  # or "task"
    return web.Response(body=orjson.dumps(message), content_type="application/json")
