"""The operators' console (``--console``): a small web application on a listener of
its own, behind a token of its own, showing the routes and their recent calls.  Off
unless enabled; when off, nothing of it is imported or on a call's path."""

from gateway.console.options import CONSOLE_TOKEN_ENV, ConsoleOptions
from gateway.console.server import Console

__all__ = ["CONSOLE_TOKEN_ENV", "Console", "ConsoleOptions"]
