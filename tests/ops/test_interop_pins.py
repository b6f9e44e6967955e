"""The interop clients are pinned: exact npm versions in a lock, a FastMCP-tasks environment agreeing with uv.lock."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from mrtr_ops.interop.catalog import ROWS
from mrtr_ops.interop.drivers import DRIVERS_DIR

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s;]+)$")


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_npm_clients_are_exact_versions_locked() -> None:
    manifest = json.loads((DRIVERS_DIR / "package.json").read_text())
    lock = json.loads((DRIVERS_DIR / "package-lock.json").read_text())
    assert lock["packages"][""]["dependencies"] == manifest["dependencies"]
    for name, version in manifest["dependencies"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name} is not pinned exactly: {version}"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version


def test_every_npm_package_a_row_names_is_pinned() -> None:
    manifest = json.loads((DRIVERS_DIR / "package.json").read_text())
    named = {p for row in ROWS for p in row.packages if p.startswith("@")}
    assert named <= set(manifest["dependencies"])


def test_the_fastmcp_tasks_environment_agrees_with_the_workspace_lock() -> None:
    locked = {
        _name(p["name"]): p["version"]
        for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]
        if "version" in p
    }
    pins = {}
    for line in (DRIVERS_DIR / "fastmcp-tasks.txt").read_text().splitlines():
        found = PIN.match(line.strip())
        if found:
            pins[_name(found.group(1))] = found.group(2)
    assert pins["fastmcp"] == locked["fastmcp"]
    assert pins["mcp"] == locked["mcp"]
    shared = set(pins) & set(locked)
    assert len(shared) > 20
    assert {n: (pins[n], locked[n]) for n in shared if pins[n] != locked[n]} == {}


def test_the_script_installs_fastmcp_tasks_without_its_dependencies() -> None:
    script = (ROOT / "scripts" / "interop").read_text()
    assert "FASTMCP_TASKS_VERSION=4.1.4" in script
    assert '--no-deps "fastmcp-tasks==$FASTMCP_TASKS_VERSION"' in script
