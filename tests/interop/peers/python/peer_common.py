"""Helpers shared by the Python client drivers (imported from the script's own folder).

Plain Python + anyio only: it runs under every peer venv's interpreter.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

STEP_TIMEOUT = 20.0
OVERALL_TIMEOUT = 60.0
# Some SDKs never answer an unknown method (python-mcp 1.7.x): don't wait long for it.
UNKNOWN_METHOD_TIMEOUT = 5.0

ROOT_URI = "file:///tmp/root"
ELICIT_ANSWER = {"name": "Ada"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["streamable-http", "sse", "stdio"], required=True)
    parser.add_argument("--url")
    parser.add_argument("--command", help="server argv as one shell-quoted string (stdio)")
    parser.add_argument("--scenario", choices=["basic", "interactive", "roots"], default="basic")
    parser.add_argument("--timeout", type=float, default=OVERALL_TIMEOUT)
    parser.add_argument("--step-timeout", type=float, default=STEP_TIMEOUT)
    parser.add_argument(
        "--mode",
        default=None,
        help="2.x only: 'auto', 'legacy' or a modern protocol version (default 2026-07-28)",
    )
    # scenario `roots` (see CONTRACT.md): the roots before/after the change, the tool
    # that reports what the server believes, and the bound on each wait.
    parser.add_argument("--root-a", default="file:///tmp/a")
    parser.add_argument("--root-b", default="file:///tmp/b")
    parser.add_argument("--roots-tool", default="show_roots")
    parser.add_argument("--roots-wait", type=float, default=5.0)
    args = parser.parse_args(argv)
    if args.transport == "stdio":
        if not args.command:
            parser.error("--command is required with --transport stdio")
        args.argv = shlex.split(args.command)
    elif not args.url:
        parser.error("--url is required with an HTTP transport")
    return args


def plain(value: Any) -> Any:
    """Pydantic model (or containers of them) -> plain JSON data: wire names, fields as received."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def error_of(exc: BaseException) -> dict[str, Any]:
    """Map an exception to the contract's {"code", "message"} error record."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return error_of(exc.exceptions[0])
    err = getattr(exc, "error", None)
    code = getattr(err, "code", None)
    message = getattr(err, "message", None)
    if code is None:
        code = getattr(exc, "code", None)
        if not isinstance(code, int) or isinstance(code, bool):
            code = None
    if message is None:
        message = str(exc) or type(exc).__name__
    return {"code": code, "message": message}


class Recorder:
    def __init__(self, sdk: str, step_timeout: float) -> None:
        self.out: dict[str, Any] = {"sdk": sdk, "protocolVersion": None, "steps": {}}
        self.step_timeout = step_timeout

    async def step(
        self, name: str, fn: Callable[[], Awaitable[Any]], limit: float | None = None
    ) -> Any:
        try:
            with anyio.fail_after(min(limit or self.step_timeout, self.step_timeout)):
                value = await fn()
        except Exception as exc:  # a step failure is data, never a crash
            print(f"step {name} failed: {exc!r}", file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
            self.out["steps"][name] = {"error": error_of(exc)}
            return None
        self.out["steps"][name] = {"result": plain(value)}
        return value

    def fatal(self, exc: BaseException) -> None:
        print(f"client aborted: {exc!r}", file=sys.stderr)
        traceback.print_exception(exc, file=sys.stderr)
        self.out["steps"].setdefault("_aborted", {"error": error_of(exc)})

    def emit(self) -> None:
        sys.stdout.write(json.dumps(self.out, sort_keys=True) + "\n")
        sys.stdout.flush()


def first_user_text(messages: list[Any]) -> str:
    for message in messages:
        if getattr(message, "role", None) != "user":
            continue
        content = message.content
        items = content if isinstance(content, list) else [content]
        for item in items:
            if getattr(item, "type", None) == "text":
                return item.text
    return ""


# --- scenario `roots` -------------------------------------------------------------------


def root_path(uri: str) -> str:
    """`file:///x/y` -> `/x/y` (what a filesystem server names), else the URI itself."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def names_root(text: str, uri: str) -> bool:
    """Does a tool's text name this root (a whitespace-separated word: its URI or path)?"""
    words = text.split()
    return uri in words or root_path(uri) in words


class RootsState:
    """The client's current roots and every invocation of its roots handler."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.invocations: list[dict[str, Any]] = []
        self._started = anyio.current_time()
        self._changed = anyio.Event()

    def answer(self) -> list[dict[str, str]]:
        """Record one invocation; return the roots to answer with (plain JSON)."""
        roots = [{"uri": self.uri, "name": "root"}]
        self.invocations.append(
            {"at": round(anyio.current_time() - self._started, 3), "roots": [self.uri]}
        )
        self._changed.set()
        self._changed = anyio.Event()
        return roots

    async def wait_for(self, count: int, limit: float) -> dict[str, Any]:
        """Wait (bounded) until the handler ran `count` times in all."""
        with anyio.move_on_after(limit):
            while len(self.invocations) < count:
                await self._changed.wait()
        return {"invoked": len(self.invocations) >= count, "count": len(self.invocations)}


def tool_text(result: Any) -> str:
    content = getattr(result, "content", None) or []
    return "\n".join(getattr(c, "text", "") for c in content if getattr(c, "type", "") == "text")


async def call_until_named(
    state: RootsState,
    call: Callable[[], Awaitable[Any]],
    uri: str,
    since: int,
    limit: float,
) -> dict[str, Any]:
    """Call the roots tool until its text names `uri`.

    The server stores the roots after our handler answered, so the first call may race
    it: retry (bounded by `limit`) only while the handler ran since `since` (else the
    server cannot know the roots and one call says all there is to say).
    """
    deadline = anyio.current_time() + limit
    attempts = 0
    while True:
        result = await call()
        attempts += 1
        text = tool_text(result)
        done = names_root(text, uri)
        if done or len(state.invocations) <= since or anyio.current_time() >= deadline:
            failed = getattr(result, "isError", None) or getattr(result, "is_error", None)
            return {
                "text": text,
                "isError": bool(failed),
                "names_expected": done,
                "attempts": attempts,
            }
        await anyio.sleep(0.1)  # polling interval; the loop is bounded by `deadline`


async def roots_scenario(
    rec: Recorder,
    args: argparse.Namespace,
    state: RootsState,
    call_tool: Callable[[], Awaitable[Any]],
    notify_changed: Callable[[], Awaitable[Any]],
) -> None:
    """connect is done; ask-wait-call, change roots, notify-wait-call (CONTRACT.md)."""
    wait = args.roots_wait
    await rec.step("wait_roots_initial", lambda: state.wait_for(1, wait))
    await rec.step("tool_before", lambda: call_until_named(state, call_tool, args.root_a, 0, wait))
    before = len(state.invocations)
    state.uri = args.root_b

    async def change() -> dict[str, Any]:
        await notify_changed()
        return {"sent": "notifications/roots/list_changed"}

    await rec.step("change_roots", change)
    await rec.step("wait_roots_changed", lambda: state.wait_for(before + 1, wait))
    await rec.step(
        "tool_after", lambda: call_until_named(state, call_tool, args.root_b, before, wait)
    )
    rec.out["roots"] = {
        "invocations": state.invocations,
        "before": (rec.out["steps"].get("tool_before", {}).get("result") or {}).get("text"),
        "after": (rec.out["steps"].get("tool_after", {}).get("result") or {}).get("text"),
    }
