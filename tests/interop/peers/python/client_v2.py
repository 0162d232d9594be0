"""Interop client driver for the Python `mcp` SDK 2.x line (`mcp.Client`).

    python client_v2.py --url URL --transport streamable-http|sse [--scenario ...] [--mode M]
    python client_v2.py --transport stdio --command '<argv>' [--scenario ...] [--mode M]

`--mode` is passed to `Client(mode=...)`: `2026-07-28` (default: adopt the modern
revision directly, no probe), `auto` (probe `server/discover`, fall back to
`initialize`) or `legacy` (`initialize` offering 2025-11-25, the only handshake
version this SDK offers).  Prints exactly one JSON object (see CONTRACT.md).
"""

from __future__ import annotations

import sys
from importlib.metadata import version
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from peer_common import (
    ELICIT_ANSWER,
    ROOT_URI,
    UNKNOWN_METHOD_TIMEOUT,
    Recorder,
    RootsState,
    error_of,
    first_user_text,
    parse_args,
    plain,
    roots_scenario,
)

SDK = f"python-mcp {version('mcp')}"
DEFAULT_MODE = "2026-07-28"


def target(args) -> Any:
    if args.transport == "stdio":
        from mcp.client.stdio import StdioServerParameters

        return StdioServerParameters(command=args.argv[0], args=args.argv[1:])
    if args.transport == "sse":
        from mcp.client.sse import sse_client

        return sse_client(args.url)
    return args.url


class Interactive:
    def __init__(self) -> None:
        self.progress: list[float] = []
        self.logs: list[Any] = []
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
            stop_reason="endTurn",
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


async def list_all(fn, key: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # bounded
        page = await fn(cursor=cursor)
        items.extend(getattr(page, key))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


async def run(args, rec: Recorder) -> None:
    interactive = args.scenario == "interactive"
    cb = Interactive()
    kwargs: dict[str, Any] = {"mode": args.mode or DEFAULT_MODE, "read_timeout_seconds": 30}
    state = RootsState(args.root_a) if args.scenario == "roots" else None
    if state is not None:
        # At 2026-07-28 the roots come back as input responses of a call (MRTR); in the
        # handshake era the server asks with a real roots/list request.
        async def list_roots(context):
            return types.ListRootsResult(
                roots=[types.Root(uri=r["uri"], name=r["name"]) for r in state.answer()]
            )

        kwargs["list_roots_callback"] = list_roots
    if interactive:
        kwargs.update(
            sampling_callback=cb.sampling,
            list_roots_callback=cb.roots,
            logging_callback=cb.logging,
            elicitation_callback=cb.elicit,
            log_level="info",
        )
    client = Client(target(args), **kwargs)

    steps = rec.out["steps"]
    try:
        async with client:
            info = client.server_info
            steps["connect"] = {
                "result": {
                    "protocolVersion": client.protocol_version,
                    "capabilities": plain(client.server_capabilities),
                    "serverInfo": plain(info) if info is not None else None,
                }
            }
            rec.out["protocolVersion"] = client.protocol_version
            if state is not None:
                await roots_scenario(
                    rec,
                    args,
                    state,
                    lambda: client.call_tool(args.roots_tool, {}),
                    client.send_roots_list_changed,
                )
            else:
                await scenario(client, rec, cb, interactive)
    except Exception as exc:
        if "connect" not in steps:
            steps["connect"] = {"error": error_of(exc)}
            print(f"connect failed: {exc!r}", file=sys.stderr)
        else:
            rec.fatal(exc)


async def scenario(client: Client, rec: Recorder, cb: Interactive, interactive: bool) -> None:
    async def tools_list():
        return {"tools": plain(await list_all(client.list_tools, "tools"))}

    await rec.step("tools_list", tools_list)
    await rec.step("call_echo", lambda: client.call_tool("echo", {"text": "hi"}))
    await rec.step("call_add", lambda: client.call_tool("add", {"a": 2, "b": 3}))
    await rec.step("call_add_invalid", lambda: client.call_tool("add", {"a": "two", "b": 3}))
    await rec.step("call_image", lambda: client.call_tool("image", {}))
    await rec.step("call_fail", lambda: client.call_tool("fail", {}))

    async def resources_list():
        return [str(r.uri) for r in await list_all(client.list_resources, "resources")]

    await rec.step("resources_list", resources_list)
    await rec.step("read_text", lambda: client.read_resource("demo://text"))
    await rec.step("read_binary", lambda: client.read_resource("demo://binary"))

    async def templates_list():
        found = await list_all(client.list_resource_templates, "resource_templates")
        return {"resourceTemplates": plain(found)}

    await rec.step("templates_list", templates_list)
    await rec.step("read_template", lambda: client.read_resource("demo://items/42"))
    await prompt_steps(client, rec)
    if interactive:
        await interactive_steps(client, rec, cb)

    async def unknown_method():
        request = types.Request[types.RequestParams | None, str](
            method="nonexistent/method", params=None
        )
        return await client.session.send_request(request, types.EmptyResult)

    await rec.step("unknown_method", unknown_method, UNKNOWN_METHOD_TIMEOUT)


async def prompt_steps(client: Client, rec: Recorder) -> None:
    async def prompts_list():
        return {"prompts": plain(await list_all(client.list_prompts, "prompts"))}

    await rec.step("prompts_list", prompts_list)
    await rec.step("get_greet", lambda: client.get_prompt("greet", {"name": "Ada"}))
    await rec.step(
        "complete",
        lambda: client.complete(
            types.PromptReference(type="ref/prompt", name="greet"),
            {"name": "name", "value": "a"},
        ),
    )


async def interactive_steps(client: Client, rec: Recorder, cb: Interactive) -> None:
    await rec.step("call_ask_name", lambda: client.call_tool("ask_name", {}))
    await rec.step("call_summarize", lambda: client.call_tool("summarize", {"text": "hello world"}))
    await rec.step("call_show_roots", lambda: client.call_tool("show_roots", {}))

    # The log level opt-in is a step of its own: a failure shows in the verdicts.
    # (2026-07-28 has no logging/setLevel: a level is asked per request.)
    if client.protocol_version not in ("2026-07-28",):
        await rec.step("set_level", lambda: client.set_logging_level("info"))

    async def call_progress():
        result = await client.call_tool("progress", {"steps": 3}, progress_callback=cb.on_progress)
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
