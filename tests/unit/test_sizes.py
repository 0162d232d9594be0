"""The size rules, over gateway/ and over what else a reader walks (bench/, scripts/,
tests/): no file over 650 lines, no function over 60.

Kept by a test so that a change that grows a module past them fails the run
instead of being noticed a session later (gateway/process/app.py reached 657 unseen;
bench/README.md and scripts/container-check grew to a journal and 1,468 lines).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "gateway"
MAX_FILE_LINES = 650
MAX_FUNCTION_LINES = 60
# Folders below these that are not the project's own (installed peers' packages).
NOT_OURS = ("node_modules", ".venv", ".peers", "__pycache__")


def _sources() -> list[Path]:
    found = [*GATEWAY.rglob("*.py")]
    for folder in ("bench", "scripts", "tests"):
        found += (ROOT / folder).rglob("*.py")
    found.append(ROOT / "scripts" / "container-check")  # a Python program without .py
    return sorted(p for p in found if not any(part in NOT_OURS for part in p.parts))


def test_the_scan_finds_every_tree() -> None:
    found = {p.relative_to(ROOT).parts[0] for p in _sources()}
    assert found == {"gateway", "bench", "scripts", "tests"}
    assert len(_sources()) > 300


def test_no_file_over_the_line_limit() -> None:
    over = {
        str(path.relative_to(ROOT)): lines
        for path in _sources()
        if (lines := len(path.read_text().splitlines())) > MAX_FILE_LINES
    }
    assert over == {}


def test_no_function_over_the_line_limit() -> None:
    over: dict[str, int] = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    over[f"{path.relative_to(ROOT)}:{node.name}"] = length
    assert over == {}
