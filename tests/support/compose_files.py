"""The compose project as `docker compose` sees it: compose.yaml with compose.override.yaml merged in.

`docker compose` reads both files by itself (the override holds what Docker
Swarm refuses: start conditions, profiles, the `worker-v2` service); tests that
check other recipes against compose read the merged project through here. The
merge follows the compose specification for the keys these files use:
mappings merge key by key, `depends_on` lists become mappings first, other
sequences are joined (`command` and `entrypoint` are replaced), `extends`
starts from the named service.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import ROOT

FILES = ("compose.yaml", "compose.override.yaml")
_REPLACED = {"command", "entrypoint"}


def _as_mapping(depends_on: object) -> object:
    if isinstance(depends_on, list):
        return {name: {"condition": "service_started"} for name in depends_on}
    return depends_on


def merge(base: object, override: object, key: str = "") -> object:
    """`override` applied over `base` the way compose merges two files (or a service over the one it extends)."""
    if key == "depends_on":
        base, override = _as_mapping(base), _as_mapping(override)
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for name, value in override.items():
            merged[name] = merge(base[name], value, name) if name in base else value
        return merged
    if isinstance(base, list) and isinstance(override, list) and key not in _REPLACED:
        return base + [item for item in override if item not in base]
    return override


def _load(root: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((root / name).read_text()) or {}
    return data


def _resolve_extends(root: Path, services: dict[str, Any]) -> dict[str, Any]:
    resolved = {}
    for name, service in services.items():
        extends = service.get("extends")
        if extends is None:
            resolved[name] = service
            continue
        source = _load(root, extends["file"])["services"] if "file" in extends else services
        own = {key: value for key, value in service.items() if key != "extends"}
        resolved[name] = merge(source[extends["service"]], own)
    return resolved


def compose_project(root: Path = ROOT, files: tuple[str, ...] = FILES) -> dict[str, Any]:
    """The merged project (variables left as written: `${VAR:-default}`); `files` in order, as `-f` names them."""
    project: dict[str, Any] = {}
    for name in files:
        if (root / name).exists():
            project = merge(project, _load(root, name))  # type: ignore[assignment]  # dict over dict is a dict
    project["services"] = _resolve_extends(root, project.get("services", {}))
    return project


def with_defaults(text: str) -> str:
    """`text` as compose reads it with no variable set: each `${VAR:-default}` is its default."""
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", text)


def default_locustfile(service: dict[str, Any]) -> Path:
    """The locustfile a Locust service runs when no variable is set, as a path in the repository.

    The image holds `loadtest/*.py` under `/app/loadtest/` (loadtest/Dockerfile).
    """
    command = [with_defaults(str(word)) for word in service["command"]]
    in_image = command[command.index("-f") + 1]
    assert in_image.startswith("/app/loadtest/"), in_image
    return ROOT / "loadtest" / in_image.removeprefix("/app/loadtest/")
