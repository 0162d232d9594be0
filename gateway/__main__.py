"""`python -m gateway` is the `gateway` command."""

from gateway.process.cli import app

app()
