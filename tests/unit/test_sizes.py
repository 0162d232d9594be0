"""The size rules of gateway/: no file over 650 lines, no function over 60.

Kept by a test so that a change that grows a module past them fails the run
instead of being noticed a session later (gateway/process/app.py reached 657 unseen).
"""

from __future__ import annotations

import ast
from pathlib import Path

GATEWAY = Path(__file__).resolve().parents[2] / "gateway"
MAX_FILE_LINES = 650
MAX_FUNCTION_LINES = 60


def _sources() -> list[Path]:
    return sorted(GATEWAY.rglob("*.py"))


def test_the_scan_finds_the_package() -> None:
    assert len(_sources()) > 100


def test_no_file_over_the_line_limit() -> None:
    over = {
        str(path.relative_to(GATEWAY)): lines
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
                    over[f"{path.relative_to(GATEWAY)}:{node.name}"] = length
    assert over == {}
