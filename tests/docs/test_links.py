"""The documentation holds together: every relative link in README.md and docs/ points
at a file that exists and, with a ``#fragment``, at a heading of that file (GitHub's
anchor rules); the README stays a five-minute read (under 20 KB)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
README_LIMIT = 20 * 1024


def prose(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks."""
    lines, inside = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            inside = not inside
        elif not inside:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(m.group(1)) for line in prose(path) if (m := re.match(r"^#{1,6} (.*)", line))}


def links(path: Path) -> list[str]:
    return [m.group(1) for line in prose(path) for m in LINK.finditer(line)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # http(s), mailto: not checked here
        path, _, fragment = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file):
            broken.append(f"{target}: no heading #{fragment} in {file.relative_to(REPO)}")
    assert not broken, f"{doc.relative_to(REPO)}:\n" + "\n".join(broken)


def test_the_readme_is_a_five_minute_read() -> None:
    size = (REPO / "README.md").stat().st_size
    assert size < README_LIMIT, f"README.md is {size} bytes; move detail to docs/"


def test_every_doc_is_reachable_from_the_readme() -> None:
    """Nothing in docs/ is an orphan: each page is linked from the README or a page that is."""
    seen: set[Path] = set()
    todo = [REPO / "README.md"]
    while todo:
        page = todo.pop()
        if page in seen:
            continue
        seen.add(page)
        for target in links(page):
            path = target.partition("#")[0]
            if path.endswith(".md") and not re.match(r"^[a-z]+:", path):
                found = (page.parent / path).resolve()
                if found.exists() and REPO / "docs" in found.parents:
                    todo.append(found)
    orphans = [p.relative_to(REPO) for p in DOCS if p not in seen and p.name != "README.md"]
    assert not orphans, f"not linked from the README or its pages: {orphans}"
