"""Interop client driver for the Python `mcp` SDK 1.x line (1.7 .. 1.30).

    python client_v1.py --url URL --transport streamable-http|sse [--scenario basic|interactive]
    python client_v1.py --transport stdio --command '<argv>' [--scenario ...]

Prints exactly one JSON object (see tests/interop/peers/CONTRACT.md).  Uses
`ClientSession` with `sse_client` / `streamable_http_client` / `stdio_client`.
"""

from __future__ import annotations

import inspect
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession
from peer_common import (
    ELICIT_ANSWER,
    ROOT_URI,
    UNKNOWN_METHOD_TIMEOUT,
    Recorder,
    RootsState,
    first_user_text,
    parse_args,
    plain,
    roots_scenario,
)
from pydantic import BaseModel

SDK = f"python-mcp {version('mcp')}"


def _accepts(fn: Any, name: str) -> bool:
    return name in inspect.signature(fn).parameters


@asynccontextmanager
async def open_streams(args):
    if args.transport == "stdio":
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=args.argv[0], args=args.argv[1:])
        async with stdio_client(params) as (read, write):
            yield read, write
    elif args.transport == "sse":
        from mcp.client.sse import sse_client

        async with sse_client(args.url) as (read, write):
            yield read, write
    else:
        from mcp.client import streamable_http as sh

        connect = getattr(sh, "streamable_http_client", None) or sh.streamablehttp_client
        async with connect(args.url) as streams:
            yield streams[0], streams[1]


class Interactive:
    """Callbacks for the `interactive` scenario, recording what arrived."""

    def __init__(self) -> None:
        self.progress: list[float] = []
        self.logs: list[Any] = []
        self.progress_token: str | None = None
        self.seen = anyio.Event()

    def _check(self) -> None:
        if len(self.progress) >= 3 and len(self.logs) >= 3:
            self.seen.set()

    async def sampling(self, context, params):
        text = first_user_text(params.messages)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"sampled: {text}"),
            model="test-model",
            stopReason="endTurn",
        )

    async def roots(self, context):
        return types.ListRootsResult(roots=[types.Root(uri=ROOT_URI, name="root")])

    async def elicit(self, context, params):
        return types.ElicitResult(action="accept", content=dict(ELICIT_ANSWER))

    async def logging(self, params):
        self.logs.append(params.data)
        self._check()

    async def on_progress(self, progress, total=None, message=None):
        self.progress.append(progress)
        self._check()

    async def message_handler(self, message) -> None:
        # Used only where call_tool has no progress_callback (1.7.x): the
        # progress notifications arrive here.
        root = getattr(message, "root", None)
        if (
            isinstance(root, types.ProgressNotification)
            and self.progress_token is not None
            and root.params.progressToken == self.progress_token
        ):
            self.progress.append(root.params.progress)
            self._check()
        await anyio.lowlevel.checkpoint()


class _CursorParams(BaseModel):
    cursor: str


async def list_all(
    session: ClientSession, method: str, request_cls, wire_method: str, key: str
) -> list[Any]:
    fn = getattr(session, method)
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # bounded: a server that never ends its pages cannot hang us
        if cursor is None:
            page = await fn()
        elif _accepts(fn, "cursor"):
            page = await fn(cursor=cursor)
        else:
            # 1.7.x: neither the method nor its params model carries a cursor; send the
            # request through the raw send_request with a params model that does.
            request = types.Request[_CursorParams, str](
                method=wire_method, params=_CursorParams(cursor=cursor)
            )
            page = await session.send_request(request, type(page))
        items.extend(getattr(page, key))
        cursor = page.nextCursor
        if not cursor:
            break
    return items


async def run_roots(args, rec: Recorder) -> None:
    """Scenario `roots`: the server asks on its own (after initialized, after the change)."""
    state = RootsState(args.root_a)

    async def list_roots(context):
        return types.ListRootsResult(
            roots=[types.Root(uri=r["uri"], name=r["name"]) for r in state.answer()]
        )

    async with (
        open_streams(args) as (read, write),
        ClientSession(read, write, list_roots_callback=list_roots) as session,
    ):
        init = await rec.step("connect", session.initialize)
        if init is None:
            return
        rec.out["protocolVersion"] = str(init.protocolVersion)
        await roots_scenario(
            rec,
            args,
            state,
            lambda: session.call_tool(args.roots_tool, {}),
            session.send_roots_list_changed,
        )


def session_options(interactive: bool, cb: Interactive) -> dict[str, Any]:
    """The callbacks this SDK version takes, for the interactive scenario."""
    kwargs: dict[str, Any] = {}
    if interactive:
        kwargs.update(
            sampling_callback=cb.sampling,
            list_roots_callback=cb.roots,
            logging_callback=cb.logging,
        )
        if _accepts(ClientSession.__init__, "elicitation_callback"):
            kwargs["elicitation_callback"] = cb.elicit
        if not _accepts(ClientSession.call_tool, "progress_callback"):
            kwargs["message_handler"] = cb.message_handler
    return kwargs


async def run(args, rec: Recorder) -> None:
    if args.scenario == "roots":
        await run_roots(args, rec)
        return
    interactive = args.scenario == "interactive"
    cb = Interactive()
    kwargs = session_options(interactive, cb)
    async with open_streams(args) as (read, write), ClientSession(read, write, **kwargs) as session:
        init = await rec.step("connect", session.initialize)
        if init is None:
            return
        rec.out["protocolVersion"] = str(init.protocolVersion)
        await basic_steps(session, rec)
        if interactive:
            await interactive_steps(session, rec, cb)
        await unknown_method_step(session, rec)


async def basic_steps(session: ClientSession, rec: Recorder) -> None:
    """Tools, resources, templates, prompts and completion: every step's result."""

    async def tools_list():
        return {
            "tools": await list_all(
                session, "list_tools", types.ListToolsRequest, "tools/list", "tools"
            )
        }

    await rec.step("tools_list", tools_list)
    await rec.step("call_echo", lambda: session.call_tool("echo", {"text": "hi"}))
    await rec.step("call_add", lambda: session.call_tool("add", {"a": 2, "b": 3}))
    await rec.step("call_add_invalid", lambda: session.call_tool("add", {"a": "two", "b": 3}))
    await rec.step("call_image", lambda: session.call_tool("image", {}))
    await rec.step("call_fail", lambda: session.call_tool("fail", {}))
    await resource_steps(session, rec)
    await prompt_steps(session, rec)


async def resource_steps(session: ClientSession, rec: Recorder) -> None:
    async def resources_list():
        found = await list_all(
            session, "list_resources", types.ListResourcesRequest, "resources/list", "resources"
        )
        return [str(r.uri) for r in found]

    await rec.step("resources_list", resources_list)
    await rec.step("read_text", lambda: session.read_resource("demo://text"))
    await rec.step("read_binary", lambda: session.read_resource("demo://binary"))

    async def templates_list():
        found = await list_all(
            session,
            "list_resource_templates",
            types.ListResourceTemplatesRequest,
            "resources/templates/list",
            "resourceTemplates",
        )
        return {"resourceTemplates": plain(found)}

    await rec.step("templates_list", templates_list)
    await rec.step("read_template", lambda: session.read_resource("demo://items/42"))


async def prompt_steps(session: ClientSession, rec: Recorder) -> None:
    async def prompts_list():
        found = await list_all(
            session, "list_prompts", types.ListPromptsRequest, "prompts/list", "prompts"
        )
        return {"prompts": plain(found)}

    await rec.step("prompts_list", prompts_list)
    await rec.step("get_greet", lambda: session.get_prompt("greet", {"name": "Ada"}))
    await rec.step(
        "complete",
        lambda: session.complete(
            types.PromptReference(type="ref/prompt", name="greet"),
            {"name": "name", "value": "a"},
        ),
    )


async def unknown_method_step(session: ClientSession, rec: Recorder) -> None:
    """Last: an SDK that cannot answer an unknown method may drop the connection."""

    async def unknown_method():
        request = types.Request[types.RequestParams | None, str](
            method="nonexistent/method", params=None
        )
        return await session.send_request(request, types.EmptyResult)

    await rec.step("unknown_method", unknown_method, UNKNOWN_METHOD_TIMEOUT)


async def interactive_steps(session: ClientSession, rec: Recorder, cb: Interactive) -> None:
    await rec.step("call_ask_name", lambda: session.call_tool("ask_name", {}))
    await rec.step(
        "call_summarize", lambda: session.call_tool("summarize", {"text": "hello world"})
    )
    await rec.step("call_show_roots", lambda: session.call_tool("show_roots", {}))

    # The log level opt-in is a step of its own: a failure shows in the verdicts.
    await rec.step("set_level", lambda: session.set_logging_level("info"))

    async def call_progress():
        if _accepts(session.call_tool, "progress_callback"):
            result = await session.call_tool(
                "progress", {"steps": 3}, progress_callback=cb.on_progress
            )
        else:
            cb.progress_token = "progress-1"
            request = types.CallToolRequest(
                method="tools/call",
                params=types.CallToolRequestParams(
                    name="progress",
                    arguments={"steps": 3},
                    _meta=types.RequestParams.Meta(progressToken=cb.progress_token),
                ),
            )
            result = await session.send_request(types.ClientRequest(request), types.CallToolResult)
        # Notifications may be delivered just after the response: wait, bounded.
        with anyio.move_on_after(2):
            await cb.seen.wait()
        data = plain(result)
        data["progress"] = list(cb.progress)
        data["logs"] = list(cb.logs)
        return data

    await rec.step("call_progress", call_progress)


def main() -> None:
    args = parse_args()
    rec = Recorder(SDK, args.step_timeout)

    async def guarded() -> None:
        try:
            with anyio.fail_after(args.timeout):
                await run(args, rec)
        except Exception as exc:
            rec.fatal(exc)

    try:
        anyio.run(guarded)
    except Exception as exc:
        rec.fatal(exc)
    rec.emit()


if __name__ == "__main__":
    main()
