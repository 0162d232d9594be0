"""The `gateway` command line."""

from __future__ import annotations

import typer

from gateway import __version__

app = typer.Typer(help="An MCP gateway that translates between protocol revisions.")


@app.command()
def version() -> None:
    """Print the gateway's version."""
    typer.echo(__version__)
