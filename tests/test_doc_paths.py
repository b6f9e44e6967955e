"""Every file or folder the documentation names in a code span exists, so a move cannot leave a page behind."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PAGES = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "services/lb/README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
]
_SPAN = re.compile(r"`([^`\s]+)`")
_SHIPPED = (".py", ".md", ".yaml", ".yml", ".json", ".toml", ".png", ".cfg", ".mjs", ".txt", ".conf", ".sh")
_NOT_IN_THE_TREE = ("reports/", "secrets/", "build/", ".cache/", "DIR/", "site/")
"""What scripts write or a reader substitutes: named in the docs, never committed."""
_SKIPPED_DIRS = {".git", ".venv", ".cache", "node_modules", "site", "__pycache__", "build", "reports"}


@cache
def _tree() -> tuple[frozenset[str], frozenset[str]]:
    """Every file and folder of the checkout (relative, posix), without environments and outputs."""
    files: set[str] = set()
    folders: set[str] = set()
    stack = [ROOT]
    while stack:
        folder = stack.pop()
        for entry in folder.iterdir():
            relative = entry.relative_to(ROOT).as_posix()
            if entry.is_dir():
                if entry.name not in _SKIPPED_DIRS:
                    folders.add(relative)
                    stack.append(entry)
            else:
                files.add(relative)
    return frozenset(files), frozenset(folders)


def _named_paths(page: Path) -> list[str]:
    """Code spans that name a file or folder of the repository (or of a package, relative to it)."""
    top = {entry.name for entry in ROOT.iterdir() if entry.is_dir()}
    named = []
    for match in _SPAN.finditer(page.read_text()):
        span = match.group(1).rstrip(".,:;")
        if "/" not in span or "::" in span or "://" in span or span.startswith(("/", ".", *_NOT_IN_THE_TREE)):
            continue
        if any(mark in span for mark in "*<>{}$=()?#") or "..." in span:
            continue  # a pattern or a placeholder, not a path
        if span.endswith(_SHIPPED) or span.split("/")[0] in top:
            named.append(span.rstrip("/"))
    return named


@cache
def _tails() -> frozenset[str]:
    """Every path of the tree and every tail of one (`compute/engine.py` of `services/worker/.../engine.py`)."""
    files, folders = _tree()
    return frozenset(
        "/".join(parts[i:]) for name in files | folders for parts in [name.split("/")] for i in range(len(parts))
    )


def _exists(path: str) -> bool:
    """A repository path, or one inside a package (`mrtr_worker/compute/policy.py`, `edge/fast_resume.py`)."""
    return path in _tails()


@pytest.mark.parametrize("page", PAGES, ids=[page.relative_to(ROOT).as_posix() for page in PAGES])
def test_every_path_a_page_names_exists(page: Path) -> None:
    missing = [path for path in _named_paths(page) if not _exists(path)]
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_a_path_that_moved_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("The engine is `services/worker/mrtr_worker/compute/engine.py`, the old one `benchmarks/gone.py`.")
    assert [path for path in _named_paths(page) if not _exists(path)] == ["benchmarks/gone.py"]
