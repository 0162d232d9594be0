"""The console's settings: where it listens, its token (from the environment only),
whether call bodies are recorded, and how many calls each route keeps."""

from __future__ import annotations

import os
from dataclasses import dataclass

from gateway.config.settings import Settings, SettingsError

__all__ = ["CONSOLE_TOKEN_ENV", "MIN_TOKEN_LENGTH", "ConsoleError", "ConsoleOptions"]

CONSOLE_TOKEN_ENV = "GATEWAY_CONSOLE_TOKEN"
MIN_TOKEN_LENGTH = 16
DEFAULT_CALLS = 200
# A recorded body is cut past this many characters of its JSON.
DEFAULT_BODY_CHARS = 4096


class ConsoleError(SettingsError):
    """Console settings that cannot be used (one line naming the problem)."""


@dataclass(frozen=True)
class ConsoleOptions:
    host: str
    port: int
    token: str
    record_bodies: bool = False
    calls_per_route: int = DEFAULT_CALLS
    body_chars: int = DEFAULT_BODY_CHARS
    # Requests per second one console serves to the token, and to each other source
    # address (buckets of twice as many).
    rate: float = 20.0

    @classmethod
    def from_env(
        cls, listen: str, *, record_bodies: bool, calls_per_route: int, rate: float = 20.0
    ) -> ConsoleOptions:
        """The token is a secret: read from the environment, never a flag or the file."""
        token = os.environ.get(CONSOLE_TOKEN_ENV, "")
        if len(token) < MIN_TOKEN_LENGTH:
            raise ConsoleError(
                f"--console needs {CONSOLE_TOKEN_ENV} in the environment "
                f"(at least {MIN_TOKEN_LENGTH} characters)"
            )
        host, sep, port = listen.rpartition(":")
        if not sep or not port.isdigit():
            raise ConsoleError(f"--console-listen must be HOST:PORT, not {listen!r}")
        return cls(
            host.strip("[]") or "127.0.0.1",
            int(port),
            token,
            record_bodies=record_bodies,
            calls_per_route=calls_per_route,
            rate=rate,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> ConsoleOptions:
        return cls.from_env(
            settings.console_listen,
            record_bodies=settings.console_bodies,
            calls_per_route=settings.console_calls,
            rate=settings.console_rate,
        )

    def __repr__(self) -> str:  # never the token, in a log line or a traceback
        return f"ConsoleOptions(host={self.host!r}, port={self.port}, bodies={self.record_bodies})"
