"""The proxy package's shape: shared rules at the top, the engine below them, no import circle.

Read from the source (every ``import``, those under ``TYPE_CHECKING`` too), so a
circle cannot hide behind a deferred import. In-process, no sockets.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mrtr_lb
from mrtr_lb import Settings, create_app
from mrtr_lb.lean.server import LeanServer

PACKAGE = Path(mrtr_lb.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Each module of mrtr_lb and the modules of mrtr_lb it imports (``from pkg import module`` counts as module)."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "mrtr_lb":
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.split(".")[0] == "mrtr_lb")
        graph[name] = {target for target in found if target in modules and target != name and target != "mrtr_lb"}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for target in sorted(graph[name]):
            cycle = visit(target, [*path, name])
            if cycle:
                return cycle
        done.add(name)
        return None

    for name in sorted(graph):
        cycle = visit(name, [])
        if cycle:
            return cycle
    return None


def test_no_module_of_the_proxy_imports_itself_in_a_circle() -> None:
    assert _cycle(_imports()) is None


def test_a_circle_is_found() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_the_shared_modules_import_the_engine_only_where_they_build_or_serve_it() -> None:
    builders = {"mrtr_lb.engines", "mrtr_lb.server", "mrtr_lb.__main__", "mrtr_lb.admin_server"}
    for name, targets in _imports().items():
        if name.startswith("mrtr_lb.lean") or name in builders:
            continue
        assert not {t for t in targets if t.startswith("mrtr_lb.lean")}, name


def test_the_public_entry_point_builds_the_lean_engine() -> None:
    settings = Settings(port=0, admin_port=0, backends=["http://127.0.0.1:9"])
    assert settings.engine == "lean"
    assert isinstance(create_app(settings), LeanServer)
