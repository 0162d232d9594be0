"""CLI tests: make `peers.registry` importable (`from peers.registry import ...`), as
tests/interop/conftest.py does."""

import sys
from pathlib import Path

_INTEROP = str(Path(__file__).resolve().parents[1] / "interop")
if _INTEROP not in sys.path:
    sys.path.insert(0, _INTEROP)
