"""`mrtr_worker.plugin`, the one import surface of packs in their own packages: complete, consistent, light.

A later reorganisation of the worker may move any module; it must keep these names
(the table `_SOURCES` says where each lives today) and the example must keep to them.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from mrtr_worker import plugin
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "collatz-pack" / "mrtr_example_pack"


def _type_checking_imports() -> dict[str, str]:
    """Name -> module of every import in the surface's `if TYPE_CHECKING:` block (what mypy sees)."""
    tree = ast.parse(Path(plugin.__file__).read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {
        alias.name: node.module or "" for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }


def test_what_mypy_sees_what_loads_and_what_is_exported_are_the_same_names() -> None:
    assert _type_checking_imports() == plugin._SOURCES
    assert sorted(plugin.__all__) == sorted(plugin._SOURCES)
    assert set(plugin.__all__) <= set(dir(plugin))


@pytest.mark.parametrize("name", plugin.__all__)
def test_every_name_is_the_object_where_it_lives(name: str) -> None:
    assert getattr(plugin, name) is getattr(importlib.import_module(plugin._SOURCES[name]), name)


def test_a_name_outside_the_surface_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'engine'"):
        _ = plugin.engine


def test_a_computation_module_can_import_the_surface_without_the_sdk() -> None:
    probe = (
        "import sys\n"
        "from mrtr_worker.plugin import Computation, Question, State\n"
        "print([m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'fastapi', 'starlette', 'redis')])"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


@pytest.mark.parametrize("module", sorted(EXAMPLE.glob("*.py")), ids=lambda path: path.name)
def test_the_example_imports_the_worker_only_through_the_surface(module: Path) -> None:
    imported = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    roots = {name.split(".")[0] for name in imported}
    assert "mcp" not in roots
    assert "mcp_types" not in roots
    assert {name for name in imported if name.split(".")[0] == "mrtr_worker"} <= {"mrtr_worker.plugin"}
