"""docs/SECURITY.md names, for every threat, tests that prove the defence: those tests must exist.

They pass because they run in the same suite; this check keeps the document
from pointing at tests that were renamed or removed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.paths import ROOT

DOC = ROOT / "docs" / "SECURITY.md"
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)?::(\w+)`|`(tests/[\w/]+\.py)`")


def _sections() -> dict[str, str]:
    parts = re.split(r"^### ", DOC.read_text(), flags=re.MULTILINE)[1:]
    return {part.splitlines()[0]: part for part in parts}


def _references(text: str) -> list[tuple[str, str | None]]:
    """(file, test) pairs; `::name` continues the file named before it, a bare file names a whole module."""
    found: list[tuple[str, str | None]] = []
    current: str | None = None
    for match in REFERENCE.finditer(text):
        path, name, module = match.groups()
        if module is not None:
            found.append((module, None))
            current = module
            continue
        current = path or current
        assert current is not None, f"::{name} with no file before it"
        found.append((current, name))
    return found


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_threat_names_at_least_one_test() -> None:
    sections = _sections()
    threats = {title: text for title, text in sections.items() if re.match(r"\d+\.", title)}
    assert len(threats) >= 10
    for title, text in threats.items():
        assert _references(text), f"threat {title!r} names no test"


def test_every_named_test_exists() -> None:
    references = _references(DOC.read_text())
    assert len(references) >= 40
    for path, name in references:
        file = ROOT / path
        assert file.is_file(), path
        if name is not None:
            assert name in _test_names(file), f"{path}::{name} does not exist"
