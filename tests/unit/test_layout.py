"""The unit tests mirror gateway/: tests/unit/<package>/test_<module>[_<aspect>].py.

A reader looking for the tests of gateway/upstream/retry.py opens
tests/unit/upstream/test_retry.py; a module merged away or renamed leaves its
test file misnamed, and this test says so.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GATEWAY, UNIT = ROOT / "gateway", ROOT / "tests" / "unit"

# Tests of a whole rather than of one module, each with why.
ACROSS = {
    "test_layering.py": "the import-linter contracts over all of gateway/",
    "test_sizes.py": "the size rules over all of gateway/",
    "test_layout.py": "this layout",
    "protocol/test_seed.py": "the seed's requirements, over every adapter",
    "protocol/adapter/test_fuzz.py": "every adapter, both roles, fuzzed",
    "protocol/adapter/test_roundtrip.py": "a client role's request read back by the server role",
}


def _named_after_a_module(test: Path) -> bool:
    folder = GATEWAY / test.parent
    stem = test.stem.removeprefix("test_")
    return any(
        stem == module.stem or stem.startswith(module.stem + "_")
        for module in folder.glob("*.py")
        if not module.name.startswith("__")
    )


def _tests() -> list[Path]:
    return sorted(path.relative_to(UNIT) for path in UNIT.rglob("test_*.py"))


def test_the_scan_finds_the_tests() -> None:
    assert len(_tests()) > 60


def test_every_unit_test_file_is_named_after_a_module_in_its_mirrored_folder() -> None:
    stray = [str(t) for t in _tests() if str(t) not in ACROSS and not _named_after_a_module(t)]
    assert stray == []


def test_every_folder_mirrors_a_package() -> None:
    folders = {p.relative_to(UNIT) for p in UNIT.rglob("*") if p.is_dir()}
    stray = [str(f) for f in folders if f.name != "__pycache__" and not (GATEWAY / f).is_dir()]
    assert stray == []


def test_the_exceptions_exist() -> None:
    assert [name for name in ACROSS if not (UNIT / name).is_file()] == []
