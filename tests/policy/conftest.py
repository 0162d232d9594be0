"""Route policy end to end: makes `peers.registry` / `peers.thirdparty` importable, as
tests/interop/conftest.py does."""

from __future__ import annotations

import sys
from pathlib import Path

_INTEROP = str(Path(__file__).resolve().parents[1] / "interop")
if _INTEROP not in sys.path:
    sys.path.insert(0, _INTEROP)
