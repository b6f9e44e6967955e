"""Small accessors over rendered manifests (plain dicts), so the tests read like the checks they make."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mrtr_ops.k8s.render import Manifest
from tests.support.compose_files import compose_project
from tests.support.paths import ROOT

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job")


def find(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    matches = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


def find_prefix(manifests: list[Manifest], kind: str, prefix: str) -> Manifest:
    """An object whose name kustomize suffixed with a content hash (generated ConfigMaps)."""
    matches = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"].startswith(prefix + "-")]
    assert len(matches) == 1, f"expected one {kind}/{prefix}-<hash>, found {len(matches)}"
    return matches[0]


def workloads(manifests: list[Manifest]) -> Iterator[Manifest]:
    return (m for m in manifests if m["kind"] in WORKLOAD_KINDS)


def pod_spec(workload: Manifest) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def pod_labels(workload: Manifest) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


def container(workload: Manifest, name: str) -> dict[str, Any]:
    matches: list[dict[str, Any]] = [c for c in pod_spec(workload)["containers"] if c["name"] == name]
    assert len(matches) == 1, f"expected one container {name!r}"
    return matches[0]


def env(container_spec: dict[str, Any]) -> dict[str, str]:
    """Literal env values (entries taken from elsewhere, like the pod name, are left out)."""
    return {e["name"]: e["value"] for e in container_spec.get("env", []) if "value" in e}


def env_names(container_spec: dict[str, Any]) -> set[str]:
    return {e["name"] for e in container_spec.get("env", [])}


def container_port(container_spec: dict[str, Any], port: int | str) -> int:
    """A probe's or Service's port, by number or by the container port's name."""
    if isinstance(port, int):
        assert any(p["containerPort"] == port for p in container_spec["ports"]), f"no container port {port}"
        return port
    named = [p["containerPort"] for p in container_spec["ports"] if p.get("name") == port]
    assert len(named) == 1, f"no container port named {port!r}"
    return int(named[0])


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def compose() -> dict[str, Any]:
    """The compose project as `docker compose` reads it (compose.yaml and compose.override.yaml)."""
    return compose_project(ROOT)


_DEFAULT = re.compile(r"\$\{[A-Z0-9_]+:?-([^${}]*)\}")
"""An innermost `${VAR:-default}` (or `${VAR-default}`): nested ones are replaced from the inside out."""


def compose_value(value: object) -> str:
    """A compose value with every `${VAR:-default}` replaced by its default (no .env, no environment)."""
    text, previous = str(value), None
    while text != previous:
        text, previous = _DEFAULT.sub(lambda m: m.group(1), text), text
    return text


def compose_env(service: str) -> dict[str, str]:
    environment = compose()["services"][service].get("environment", {})
    return {key: compose_value(value) for key, value in environment.items()}


def dockerfile_user(dockerfile: Path) -> str:
    """The last `USER` of a Dockerfile: the user the image's process runs as."""
    users = [line.split()[1] for line in dockerfile.read_text().splitlines() if line.startswith("USER ")]
    assert users, f"{dockerfile} sets no USER"
    return users[-1]
