"""The TOML config file (``--config`` / ``GATEWAY_CONFIG``), read once and checked,
and the error every settings problem is told by."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any


class SettingsError(ValueError):
    """Settings that cannot be used; ``str()`` is one line naming the problem."""


def read_config_file(path: Path) -> dict[str, Any]:
    """A TOML config file: top-level settings and ``[[routes]]`` tables."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError as exc:
        raise SettingsError(f"config file {path}: not found") from exc
    except OSError as exc:
        raise SettingsError(f"config file {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path}: not valid TOML: {exc}") from exc
    if "config" in data:
        raise SettingsError(f"config file {path}: 'config' cannot be set inside a config file")
    return data
