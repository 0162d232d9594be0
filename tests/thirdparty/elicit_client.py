"""A tiny client run by a pinned Python SDK interpreter (not by pytest): connects over
Streamable HTTP, calls one tool whose server asks for elicitation, accepts with
``{"name": "Ada"}`` and prints one JSON line: the schema its handler saw, the
negotiated revision, and the tool's text (or the error)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client


async def main(url: str, tool: str) -> None:
    seen: list[Any] = []

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        seen.append(params.requestedSchema)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    out: dict[str, Any] = {}
    async with (
        streamablehttp_client(url) as (read, write, _),
        ClientSession(read, write, elicitation_callback=elicit) as session,
    ):
        init = await session.initialize()
        out["protocolVersion"] = init.protocolVersion
        try:
            result = await asyncio.wait_for(session.call_tool(tool, {}), 30)
            out["text"] = "\n".join(c.text for c in result.content if c.type == "text")
            out["isError"] = bool(result.isError)
        except Exception as exc:  # reported to the test
            out["error"] = f"{type(exc).__name__}: {exc}"
    out["schemas"] = seen
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
