"""A 2025-11-25 client (the pinned official Python SDK 1.30.0): one session, one
``tools/call echo``; prints the text it got.  Run with that SDK's interpreter."""

import sys

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def main(url: str) -> None:
    async with streamablehttp_client(url) as (rd, wr, _), ClientSession(rd, wr) as session:
        init = await session.initialize()
        result = await session.call_tool("echo", {"text": "from the sdk"})
        print(init.protocolVersion, result.content[0].text)


anyio.run(main, sys.argv[1])
