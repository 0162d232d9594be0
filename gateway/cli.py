"""The `gateway` command line."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

import structlog
import typer

from gateway import __version__
from gateway.app import Gateway, RouteSpec

app = typer.Typer(
    help="An MCP gateway: lets a client of any MCP protocol revision use a server of any other.",
    no_args_is_help=True,
    add_completion=False,
)


def _configure_logging(level: str, fmt: str) -> None:
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
    )


@app.command()
def serve(
    route: Annotated[
        list[str] | None,
        typer.Option(
            "--route",
            help="PATH=UPSTREAM[,version=REV][,transport=auto|http|sse][,timeout=SECONDS]"
            "[,ttl_ms=N][,cache_scope=private|public]; repeatable.  Without any, the "
            "gateway fronts its bundled demo server at /mcp.",
        ),
    ] = None,
    listen: Annotated[str, typer.Option(help="HOST:PORT to listen on.")] = "127.0.0.1:8080",
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
    log_format: Annotated[str, typer.Option(help="json or console.")] = "json",
) -> None:
    """Serve MCP clients of every revision in front of the given upstream servers."""
    _configure_logging(log_level, log_format)
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise typer.BadParameter(f"--listen {listen!r}: expected HOST:PORT")
    try:
        specs = [RouteSpec.parse(r) for r in route or []]
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    gateway = Gateway(specs, host=host.strip("[]") or "127.0.0.1", port=int(port))
    try:
        asyncio.run(gateway.serve_forever(demo=not specs))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


@app.command()
def version() -> None:
    """Print the gateway's version."""
    typer.echo(__version__)
