"""Purpose-built misbehaving MCP upstreams: small aiohttp apps on loopback ports.

Each speaks just enough Streamable HTTP MCP to get past the gateway's era
probe and handshake, like a 2025-06-18 server: a request without a session is
refused with 400 (so the modern probe falls back), `initialize` is answered
with an `Mcp-Session-Id`, notifications get 202, `tools/list` lists `echo`.
Then `tools/call` does whatever the behaviour says:

  ok        answer `echo: <text>` (the well-behaved neighbour)
  ok_sse    the same answer as the one event of an SSE response (the body's end follows
            in a write of its own, as a real server's does)
  odd_sse   like ok_sse, but the answer comes after messages that are not JSON-RPC:
            "notifications" and a "request" whose method is not a string (ODD_MESSAGES)
  hang      never answer (until teardown releases the handler)
  hang_sse  open an SSE response, send one notification, then go silent
  wedged    never answer, and from then on answer nothing at all (a stuck server)
  garbage   200 `application/json` whose body is not JSON
  html500   500 with an HTML error page
  reset     open an SSE response, send one notification, then reset the TCP connection
  ask       asks its client mid-call, the handshake era's way: server requests on the
            POST's SSE stream, answered by POSTs of JSON-RPC responses (see ASK_TOOLS)
  tasks     a 2025-11-25 server with core tasks (`tasks.requests.tools.call`): `slow`
            (taskSupport optional) and `batch` (required) run as tasks when the call
            says `task`, which stay `working` until the test calls ``finish()``;
            answers tasks/get, tasks/result and tasks/cancel (see TASK_TOOLS);
            `confirm` (optional) is `input_required` at once, and asks its question
            (elicitation/create) on the stream of a tasks/result, then completes
  flaky     lists `read_it` (readOnlyHint), `same_again` (idempotentHint) and `plain` (no
            hint) besides `echo`; every run of a tool is recorded in ``runs`` (name ->
            count) before it answers, and the first run of each tool has its answer cut
            (an SSE response reset mid-body): it ran, and the gateway heard no answer
  notify    like ok, but declares `listChanged` (tools, prompts, resources) and
            `resources.subscribe`, records `resources/(un)subscribe`, offers the GET
            stream, and sends on it whatever the test hands to ``notify()``

``stateless=True`` makes any of them a 2026-07-28 server instead: `server/discover`
answered, no `initialize`, no session; each request behaves as above.

No sleeps anywhere: a handler that must hang waits on ``released``, an
asyncio.Event set at teardown; ``call_started`` tells the test a call arrived.

Run as a program (``python -m tests.e2e.fake_upstreams BEHAVIOUR``) it serves
on a free port in its own process, prints ``ready <url>`` and then ``call`` for
every tools/call, so a test can kill it mid-call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import uuid
from typing import Any

from aiohttp import web

from bench.faultserver import reset_connection
from tests.e2e.fake_rpc import _answer_text, _refusal, _rpc_error, _rpc_result, _sse
from tests.e2e.fake_tasks import TASKS_CAPABILITIES, TasksBehaviour

BEHAVIOURS = (
    "flaky",
    "urlreq",
    "logs",
    "ok",
    "ok_sse",
    "odd_sse",
    "hang",
    "hang_sse",
    "wedged",
    "garbage",
    "html500",
    "reset",
    "ask",
    "notify",
    "tasks",
)
# What `odd_sse` sends before its answer: JSON, but not JSON-RPC (a method must be a
# string); the last one has an id, as if it were a request.
ODD_MESSAGES: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "method": ["notifications", "message"]},
    {"jsonrpc": "2.0", "method": {"name": "notifications/progress"}, "params": {}},
    {"jsonrpc": "2.0", "method": 7},
    {"jsonrpc": "2.0", "method": None, "params": {"level": "info"}},
    {"jsonrpc": "2.0", "id": 9, "method": ["roots/list"]},
]

# The `notify` behaviour's capabilities.
NOTIFY_CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": True},
    "prompts": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
}
PROTOCOL_VERSION = "2025-06-18"
MODERN_VERSION = "2026-07-28"  # the `stateless=True` server's
SERVER_INFO = "io.modelcontextprotocol/serverInfo"

# The `ask` behaviour's tools: what each asks, in order (one ask per round).
ASK_NAME = {
    "message": "What is your name?",
    "requestedSchema": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
}
ASK_COLOUR = {
    "message": "What is your favourite colour?",
    "requestedSchema": {
        "type": "object",
        "properties": {"colour": {"type": "string"}},
        "required": ["colour"],
    },
}
ASK_SAMPLE = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "Say something"}}],
    "maxTokens": 20,
}
ASK_TOOLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "ask_name": [("elicitation/create", ASK_NAME)],
    "ask_twice": [("elicitation/create", ASK_NAME), ("elicitation/create", ASK_COLOUR)],
    "ask_sample": [("sampling/createMessage", ASK_SAMPLE)],
}


# The `flaky` behaviour's tools and the annotations each says.
FLAKY_TOOLS: dict[str, dict[str, Any]] = {
    "read_it": {"readOnlyHint": True},
    "same_again": {"idempotentHint": True, "readOnlyHint": False},
    "plain": {"destructiveHint": True},
}


class FakeUpstream(TasksBehaviour):
    """One fake MCP server; ``async with FakeUpstream("hang") as fake: fake.url``."""

    def __init__(self, behaviour: str, *, announce: bool = False, stateless: bool = False) -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r} (known: {BEHAVIOURS})")
        self.behaviour = behaviour
        self.announce = announce
        # A 2026-07-28 server instead: server/discover, no initialize, no session.
        self.stateless = stateless
        self.released = asyncio.Event()
        self.go = asyncio.Event()  # `ask_then_go` answers once this is set
        self.call_started = asyncio.Event()
        self.calls = 0
        self.initializes = 0
        self.lists = 0  # tools/list requests answered
        self.cancelled: list[Any] = []
        self.abandoned = 0  # `wedged`: requests the client closed unanswered
        self._cancel_seen = asyncio.Condition()
        self.sessions: set[str] = set()
        # Methods of the notifications received, and of the requests it did not know.
        self.notified: list[str] = []
        self.unknown: list[str] = []
        # Set to an Event: vendor notifications are held (unanswered) until it is set.
        self.hold_notices: asyncio.Event | None = None
        self.url = ""
        self._runner: web.AppRunner | None = None
        # Every TCP connection a request came on (its transport): how many were opened.
        self.connections: set[Any] = set()
        self.seen_headers: list[dict[str, str]] = []  # every request's headers, in order
        # The `ask` behaviour: what was asked and what came back, in order.
        self.call_ids: list[Any] = []  # upstream ids of every tools/call
        self.asked: list[dict[str, Any]] = []  # the server requests sent
        self.answers: list[dict[str, Any]] = []  # the JSON-RPC responses received
        self.levels: list[Any] = []  # logging/setLevel requests received (`logs`)
        self.results: list[dict[str, Any]] = []  # the final results sent
        # True: after a refusal (elicitation cancel/decline, or an error answer) the
        # call goes on, until cancelled or released, like a server ignoring it.
        self.linger = False
        self._ask_ids = 0
        self._awaiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._seen = asyncio.Condition()
        # The `notify` behaviour: (method, uri) of every resources/(un)subscribe, and
        # the open GET streams by session.
        self.subscriptions: list[tuple[str, str]] = []
        self.streams: dict[str, asyncio.Queue[dict[str, Any] | None]] = {}
        # The `tasks` behaviour: every task by id, the tools/call params received, and
        # the results each task ends with.
        self.tasks: dict[str, dict[str, Any]] = {}
        self.task_params: list[dict[str, Any]] = []
        self.task_results: dict[str, dict[str, Any]] = {}
        self.task_requests: list[tuple[str, Any]] = []  # (method, taskId) of tasks/*
        self.runs: dict[str, int] = {}  # `flaky`: tool name -> runs

    # ------------------------------------------------------------ lifecycle

    async def start(self, port: int = 0) -> str:
        app = web.Application()
        app.router.add_route("*", "/mcp", self._handle)
        # handle_signals=False: several fakes share the test's loop.
        # A wedged server sees its clients give up (their requests' handlers cancelled).
        self._runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            shutdown_timeout=1.0,
            handler_cancellation=self.behaviour == "wedged",
        )
        await self._runner.setup()
        # A given port is a HeldPort's (tests.e2e.gateway_proc): shared with it.
        site = web.TCPSite(self._runner, "127.0.0.1", port, reuse_port=bool(port))
        await site.start()
        bound = next(a[1] for a in self._runner.addresses if isinstance(a, tuple))
        self.url = f"http://127.0.0.1:{bound}/mcp"
        return self.url

    async def stop(self) -> None:
        self.released.set()  # let every hanging handler return
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeUpstream:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_cancelled(self, count: int, within: float) -> list[Any]:
        """Until ``count`` notifications/cancelled have arrived (bounded); their requestIds."""
        async with asyncio.timeout(within), self._cancel_seen:
            await self._cancel_seen.wait_for(lambda: len(self.cancelled) >= count)
        return list(self.cancelled)

    async def _record_cancel(self, message: dict[str, Any]) -> None:
        async with self._cancel_seen:
            self.cancelled.append((message.get("params") or {}).get("requestId"))
            self._cancel_seen.notify_all()
        async with self._seen:
            self._seen.notify_all()

    async def wait_for(self, predicate: Any, within: float) -> None:
        """Until ``predicate()`` holds (re-checked on every ask, answer, result and
        cancellation); bounded by ``within`` seconds."""
        async with asyncio.timeout(within), self._seen:
            await self._seen.wait_for(predicate)

    async def wait_asked(self, count: int, within: float) -> list[dict[str, Any]]:
        await self.wait_for(lambda: len(self.asked) >= count, within)
        return list(self.asked)

    async def wait_answers(self, count: int, within: float) -> list[dict[str, Any]]:
        await self.wait_for(lambda: len(self.answers) >= count, within)
        return list(self.answers)

    async def _note(self, record: list[dict[str, Any]], message: dict[str, Any]) -> None:
        async with self._seen:
            record.append(message)
            self._seen.notify_all()

    async def _asking_call(
        self, request: web.Request, id_: Any, params: dict[str, Any]
    ) -> web.StreamResponse:
        """An `ask` tool: each of its asks in turn on the POST's SSE stream, then the
        result (`hello <answers>`); other tools echo."""
        name = str(params.get("name"))
        if name == "ask_then_go":
            return await self._ask_then_go(request, id_)
        if name not in ASK_TOOLS:
            text = str((params.get("arguments") or {}).get("text", ""))
            result = {"content": [{"type": "text", "text": f"echo: {text}"}]}
            await self._note(self.results, result)
            return web.json_response(_rpc_result(id_, result))
        stream = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await stream.prepare(request)
        said: list[str] = []
        try:
            for method, ask_params in ASK_TOOLS[name]:
                answer = await self._ask(stream, method, ask_params)
                if answer is None:  # released at teardown
                    return stream
                if _refusal(answer) and self.linger:
                    await self._until_cancelled(id_)
                    return stream
                said.append(_answer_text(method, answer))
            result = {"content": [{"type": "text", "text": "hello " + ", ".join(said)}]}
            await self._note(self.results, result)
            await stream.write(_sse(_rpc_result(id_, result)))
        except (ConnectionError, RuntimeError):
            pass  # the gateway went away (it cancelled the call)
        return stream

    async def _ask_then_go(self, request: web.Request, id_: Any) -> web.StreamResponse:
        """`ask_then_go`: asks for a name, then, once the test sets ``go``, answers
        without waiting for it (a handler that gave up on its question)."""
        stream = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await stream.prepare(request)
        self._ask_ids += 1
        message = {
            "jsonrpc": "2.0",
            "id": f"ask-{self._ask_ids}",
            "method": "elicitation/create",
            "params": ASK_NAME,
        }
        await stream.write(_sse(message))
        await self._note(self.asked, message)
        go = asyncio.ensure_future(self.go.wait())  # the test's word (or teardown's)
        released = asyncio.ensure_future(self.released.wait())
        try:
            await asyncio.wait({go, released}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            go.cancel()
            released.cancel()
        result = {"content": [{"type": "text", "text": "went on without it"}]}
        await stream.write(_sse(_rpc_result(id_, result)))
        return stream

    async def _ask(
        self, stream: web.StreamResponse, method: str, params: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Send one server request on the call's stream; its answer (None if released)."""
        self._ask_ids += 1
        ask_id = f"ask-{self._ask_ids}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._awaiting[ask_id] = future
        message = {"jsonrpc": "2.0", "id": ask_id, "method": method, "params": params}
        await stream.write(_sse(message))
        await self._note(self.asked, message)
        released = asyncio.ensure_future(self.released.wait())
        either: set[asyncio.Future[Any]] = {future, released}
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            released.cancel()
            self._awaiting.pop(ask_id, None)
        return future.result() if future.done() else None

    async def _until_cancelled(self, id_: Any) -> None:
        """Wait until the gateway cancels call ``id_`` (or teardown releases it)."""
        released = asyncio.ensure_future(self.released.wait())
        cancelled = asyncio.ensure_future(self.wait_for(lambda: id_ in self.cancelled, 3600))
        try:
            await asyncio.wait({released, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            released.cancel()
            cancelled.cancel()

    async def _response(self, message: dict[str, Any]) -> web.Response:
        """A JSON-RPC response from the gateway to one of our server requests."""
        await self._note(self.answers, message)
        future = self._awaiting.get(message.get("id"))
        if future is not None and not future.done():
            future.set_result(message)
        return web.Response(status=202)

    # ------------------------------------------------------------- protocol

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.connections.add(request.transport)
        self.seen_headers.append(dict(request.headers))
        if self.behaviour == "wedged" and self.call_started.is_set():
            return await self._wedged(request)
        if request.method == "DELETE":
            self.sessions.discard(request.headers.get("Mcp-Session-Id", ""))
            return web.Response(status=200)
        if request.method == "GET" and self.behaviour == "notify":
            return await self._notify_stream(request)
        if request.method != "POST":
            return web.Response(status=405, headers={"Allow": "POST, DELETE"})
        try:
            message = json.loads(await request.read())
        except ValueError:
            return web.json_response(_rpc_error(None, -32700, "Parse error"), status=400)
        if not isinstance(message, dict):
            return web.json_response(_rpc_error(None, -32600, "Invalid Request"), status=400)
        if self.stateless:
            return await self._stateless(request, message)
        if message.get("method") == "initialize":
            return self._initialize(message.get("id"))
        session = request.headers.get("Mcp-Session-Id")
        if session is None:
            # What a 2025-era SDK server answers to a request outside a session.
            return web.json_response(
                _rpc_error(None, -32600, "Bad Request: No valid session ID provided"), status=400
            )
        if session not in self.sessions:
            return web.json_response(_rpc_error(None, -32001, "Session not found"), status=404)
        return await self._in_session(request, message)

    async def _wedged(self, request: web.Request) -> web.StreamResponse:
        """Every request once a call has begun: held until released (a cancellation
        noted on the way)."""
        if request.method == "POST":
            with contextlib.suppress(ValueError):
                message = json.loads(await request.read())
                if isinstance(message, dict) and message.get("method") == (
                    "notifications/cancelled"
                ):
                    await self._record_cancel(message)
        try:
            await self.released.wait()
        except asyncio.CancelledError:
            self.abandoned += 1  # the client gave up on this request (closed it)
            raise
        return web.Response(status=503)

    async def _stateless(self, request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        """As a 2026-07-28 server: every request on its own (the same behaviours)."""
        if request.headers.get("MCP-Protocol-Version") != MODERN_VERSION:
            error = _rpc_error(message.get("id"), -32022, "Unsupported protocol version")
            error["error"]["data"] = {"supported": [MODERN_VERSION]}
            return web.json_response(error, status=400)
        if message.get("method") == "server/discover":
            result = {
                "supportedVersions": [MODERN_VERSION],
                "capabilities": {"tools": {}},
                "_meta": {SERVER_INFO: {"name": f"fake-{self.behaviour}", "version": "0"}},
            }
            return web.json_response(_rpc_result(message.get("id"), result))
        return await self._in_session(request, message)

    def _initialize(self, id_: Any) -> web.Response:
        self.initializes += 1
        session = uuid.uuid4().hex
        self.sessions.add(session)
        if self.behaviour == "tasks":
            capabilities: dict[str, Any] = TASKS_CAPABILITIES
        elif self.behaviour == "notify":
            capabilities = NOTIFY_CAPABILITIES
        elif self.behaviour == "logs":
            capabilities = {"tools": {}, "logging": {}}
        else:
            capabilities = {"tools": {}}
        # URL elicitation (and its -32042), and tasks, exist from 2025-11-25 on.
        newest = self.behaviour in ("urlreq", "tasks")
        result = {
            "protocolVersion": "2025-11-25" if newest else PROTOCOL_VERSION,
            "capabilities": capabilities,
            "serverInfo": {"name": f"fake-{self.behaviour}", "version": "0"},
        }
        return web.json_response(_rpc_result(id_, result), headers={"Mcp-Session-Id": session})

    async def _in_session(
        self, request: web.Request, message: dict[str, Any]
    ) -> web.StreamResponse:
        method, id_ = message.get("method"), message.get("id")
        is_reply = method is None and ("result" in message or "error" in message)
        if is_reply and self.behaviour in ("ask", "tasks"):
            return await self._response(message)
        if id_ is None:  # a notification
            self.notified.append(str(method))
            if self.hold_notices is not None and str(method).startswith("notifications/vendor"):
                await self.hold_notices.wait()
            if method == "notifications/cancelled":
                await self._record_cancel(message)
            return web.Response(status=202)
        if method == "ping":
            return web.json_response(_rpc_result(id_, {}))
        if self.behaviour == "tasks":
            return await self._tasks_request(request, id_, str(method), message)
        if method == "logging/setLevel" and self.behaviour == "logs":
            self.levels.append((message.get("params") or {}).get("level"))
            return web.json_response(_rpc_result(id_, {}))
        if self.behaviour == "notify" and method in (
            "resources/subscribe",
            "resources/unsubscribe",
        ):
            await self._note_subscription(str(method), (message.get("params") or {}).get("uri"))
            return web.json_response(_rpc_result(id_, {}))
        if method == "tools/list":
            return web.json_response(_rpc_result(id_, {"tools": self._tools()}))
        if method == "tools/call":
            self.calls += 1
            self.call_ids.append(id_)
            self.call_started.set()
            if self.announce:
                print("call", flush=True)
            return await self._call(request, id_, message.get("params") or {})
        self.unknown.append(str(method))
        return web.json_response(_rpc_error(id_, -32601, f"Method not found: {method}"))

    def _tools(self) -> list[dict[str, Any]]:
        self.lists += 1
        tools: list[dict[str, Any]] = [
            {
                "name": "echo",
                "description": "Echo text",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
            }
        ]
        if self.behaviour == "flaky":
            tools += [
                {"name": name, "inputSchema": {"type": "object"}, "annotations": hints}
                for name, hints in FLAKY_TOOLS.items()
            ]
        if self.behaviour == "ask":
            tools += [{"name": name, "inputSchema": {"type": "object"}} for name in ASK_TOOLS]
        return tools

    async def _call(
        self, request: web.Request, id_: Any, params: dict[str, Any]
    ) -> web.StreamResponse:
        behaviour = self.behaviour
        if behaviour in ("ok", "logs", "ok_sse", "odd_sse"):
            text = str((params.get("arguments") or {}).get("text", ""))
            result = {"content": [{"type": "text", "text": f"echo: {text}"}]}
            if behaviour in ("ok", "logs"):
                return web.json_response(_rpc_result(id_, result))
            answer = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await answer.prepare(request)
            for odd in ODD_MESSAGES if behaviour == "odd_sse" else ():
                await answer.write(_sse(odd))
            await answer.write(_sse(_rpc_result(id_, result)))
            return answer
        if behaviour in ("hang", "wedged"):
            await self.released.wait()
            return web.json_response(_rpc_error(id_, -32603, "released at teardown"))
        if behaviour == "garbage":
            return web.Response(body=b"this is {not JSON at all", content_type="application/json")
        if behaviour == "html500":
            page = "<html><body><h1>500 Internal Server Error</h1></body></html>"
            return web.Response(status=500, text=page, content_type="text/html")
        if behaviour == "ask":
            return await self._asking_call(request, id_, params)
        if behaviour == "flaky":
            return await self._flaky_call(request, id_, str(params.get("name")))
        if behaviour == "urlreq":
            # 2025-11-25's "URL elicitation required": the first call is refused until
            # the user has visited the page; the next one succeeds.
            if self.calls == 1:
                elicitation = {
                    "mode": "url",
                    "elicitationId": "e-1",
                    "url": "https://auth.example/consent",
                    "message": "Please authorize access",
                }
                data = {"elicitations": [elicitation]}
                error = {"code": -32042, "message": "URL elicitation required", "data": data}
                return web.json_response({"jsonrpc": "2.0", "id": id_, "error": error})
            result = {"content": [{"type": "text", "text": "authorized"}]}
            return web.json_response(_rpc_result(id_, result))
        # The SSE behaviours: a response stream that starts well.
        stream = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await stream.prepare(request)
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "working on it"},
        }
        await stream.write(_sse(note))
        if behaviour == "hang_sse":
            await self.released.wait()
            return stream
        assert behaviour == "reset"
        reset_connection(request)
        return stream

    async def _flaky_call(self, request: web.Request, id_: Any, name: str) -> web.StreamResponse:
        runs = self.runs[name] = self.runs.get(name, 0) + 1  # it ran
        if runs > 1 or name == "echo":
            result = {"content": [{"type": "text", "text": f"{name} ran {runs} times"}]}
            return web.json_response(_rpc_result(id_, result))
        stream = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        await stream.write(b": working\n\n")
        reset_connection(request)  # the answer is lost on the way
        return stream

    # ---------------------------------------------------------- the `notify` behaviour

    async def wait_streams(self, count: int, within: float) -> None:
        """Until ``count`` sessions have their GET stream open (bounded)."""
        await self.wait_for(lambda: len(self.streams) >= count, within)

    async def wait_subscriptions(self, count: int, within: float) -> list[tuple[str, str]]:
        """Until ``count`` resources/(un)subscribe have arrived (bounded); all of them."""
        await self.wait_for(lambda: len(self.subscriptions) >= count, within)
        return list(self.subscriptions)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a notification on every open GET stream; how many streams got it."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        for queue in self.streams.values():
            queue.put_nowait(message)
        return len(self.streams)

    async def _note_subscription(self, method: str, uri: Any) -> None:
        async with self._seen:
            self.subscriptions.append((method, str(uri)))
            self._seen.notify_all()

    async def _notify_stream(self, request: web.Request) -> web.StreamResponse:
        session = request.headers.get("Mcp-Session-Id", "")
        if session not in self.sessions:
            return web.Response(status=404)
        if session in self.streams:
            return web.Response(status=409)
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        stream = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await stream.prepare(request)
        async with self._seen:
            self.streams[session] = queue
            self._seen.notify_all()
        released = asyncio.ensure_future(self.released.wait())
        try:
            while True:
                got = asyncio.ensure_future(queue.get())
                await asyncio.wait({got, released}, return_when=asyncio.FIRST_COMPLETED)
                if not got.done():
                    got.cancel()
                    break
                message = got.result()
                if message is None:
                    break
                await stream.write(_sse(message))
        except (ConnectionError, RuntimeError):
            pass
        finally:
            released.cancel()
            self.streams.pop(session, None)
        return stream


# ------------------------------------------------------------------ the `ask` behaviour


async def _main(behaviour: str, port: int) -> None:
    fake = FakeUpstream(behaviour, announce=True)
    url = await fake.start(port)
    print("ready", url, flush=True)
    await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    # python -m tests.e2e.fake_upstreams BEHAVIOUR [PORT]
    asyncio.run(_main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0))
