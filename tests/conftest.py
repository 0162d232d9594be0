"""Suite-wide fixtures."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """Each test starts with structlog's defaults: a CLI test that configured logging
    (say, at warning level) must not hide another test's log lines."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()
    root = logging.getLogger()
    for handler in list(root.handlers):
        if (
            not isinstance(handler, logging.NullHandler)
            and "LogCaptureHandler" not in type(handler).__name__
        ):
            root.removeHandler(handler)
