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
    parser.add_argument("--scenario", choices=["basic", "interactive"], default="basic")
    parser.add_argument("--timeout", type=float, default=OVERALL_TIMEOUT)
    parser.add_argument("--step-timeout", type=float, default=STEP_TIMEOUT)
    parser.add_argument(
        "--mode",
        default=None,
        help="2.x only: 'auto', 'legacy' or a modern protocol version (default 2026-07-28)",
    )
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
