"""A local OTLP/HTTP trace sink for the benchmark, run as its own process.

    python -m bench.otlpsink PORT

Accepts ``POST /v1/traces`` (protobuf ``ExportTraceServiceRequest``, what the
gateway's exporter sends), counts the export requests, bytes and spans, and
answers as a collector does; ``GET /stats`` says ``{"exports": N, "bytes": B,
"spans": S}``.  It decodes (to count spans) in its own process: that cost is
not the gateway's.  Needs the gateway's ``otel`` extra (``opentelemetry-proto``).
"""

from __future__ import annotations

import asyncio
import gzip
import sys

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

_counts = {"exports": 0, "bytes": 0, "spans": 0}
_ANSWER = ExportTraceServiceResponse().SerializeToString()


async def traces(request: web.Request) -> web.Response:
    body = await request.read()
    _counts["bytes"] += len(body)
    if request.headers.get("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    export = ExportTraceServiceRequest.FromString(body)
    _counts["exports"] += 1
    _counts["spans"] += sum(
        len(scope.spans) for resource in export.resource_spans for scope in resource.scope_spans
    )
    return web.Response(body=_ANSWER, content_type="application/x-protobuf")


async def stats(request: web.Request) -> web.Response:
    return web.json_response(_counts)


async def main(port: int) -> None:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/traces", traces)
    app.router.add_get("/stats", stats)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print(f"ready http://127.0.0.1:{port}", flush=True)
    await asyncio.Event().wait()  # until stopped


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
