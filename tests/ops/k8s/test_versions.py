"""The v2 overlay differs from v1 in exactly the worker's image and version, like compose's `worker-v2`.

Anything else changing between the two would make `kubectl apply -k overlays/v2` more than a
rolling update of the workers (a proxy restart, a changed selector, which the API refuses).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mrtr_ops.k8s.render import Manifest, render
from tests.ops.k8s.objects import compose, compose_env, container, env, find, pod_labels
from tests.support.paths import MANIFESTS

VERSION_LABEL = "app.kubernetes.io/version"


def _flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Path -> leaf value; lists of named entries (containers, env, ports) are keyed by name."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out |= _flatten(item, f"{path}.{key}")
        return out
    if isinstance(value, list) and all(isinstance(item, dict) and "name" in item for item in value):
        out = {}
        for item in value:
            out |= _flatten(item, f"{path}[{item['name']}]")
        return out
    return {path: value}


def _by_object(manifests: list[Manifest]) -> dict[str, dict[str, Any]]:
    return {f"{m['kind']}/{m['metadata']['name']}": _flatten(m) for m in manifests}


def test_v2_changes_exactly_the_worker_image_and_version(rendered: dict[str, list[Manifest]]) -> None:
    v1, v2 = _by_object(rendered["overlays/v1"]), _by_object(rendered["overlays/v2"])
    assert v1.keys() == v2.keys()
    changes = {
        (obj, path)
        for obj in v1
        for path in v1[obj].keys() | v2[obj].keys()
        if v1[obj].get(path, "<absent>") != v2[obj].get(path, "<absent>")
    }
    worker = "Deployment/worker"
    containers = ".spec.template.spec.containers[worker]"
    assert changes == {
        (worker, f".spec.template.metadata.labels.{VERSION_LABEL}"),
        (worker, f"{containers}.image"),
        (worker, f"{containers}.env[MRTR_WORKER_WRITE_STATE_FORMAT].name"),
        (worker, f"{containers}.env[MRTR_WORKER_WRITE_STATE_FORMAT].value"),
    }


def test_each_overlay_runs_the_image_compose_builds_for_its_version(rendered: dict[str, list[Manifest]]) -> None:
    services = compose()["services"]
    for overlay, service, version in (("overlays/v1", "worker", "1"), ("overlays/v2", "worker-v2", "2")):
        deployment = find(rendered[overlay], "Deployment", "worker")
        assert container(deployment, "worker")["image"] == services[service]["image"]
        assert services[service]["build"]["args"]["WORKER_VERSION"] == version
        assert pod_labels(deployment)[VERSION_LABEL] == version


def test_v2_sets_what_compose_sets_for_worker_v2(rendered: dict[str, list[Manifest]]) -> None:
    """The env compose adds for `worker-v2` over `worker` is the env the v2 overlay adds."""
    compose_added = {k: v for k, v in compose_env("worker-v2").items() if compose_env("worker").get(k) != v}
    v1 = env(container(find(rendered["overlays/v1"], "Deployment", "worker"), "worker"))
    v2 = env(container(find(rendered["overlays/v2"], "Deployment", "worker"), "worker"))
    assert {k: v for k, v in v2.items() if v1.get(k) != v} == compose_added


def test_a_registry_overlay_on_top_of_v2_keeps_the_tag(kubectl_path: Path, tmp_path: Path) -> None:
    """What docs/kubernetes.md tells users to write to pull the images from their registry."""
    overlay = tmp_path / "mine"
    overlay.mkdir()
    v2 = os.path.relpath(MANIFESTS / "overlays" / "v2", overlay)
    (overlay / "kustomization.yaml").write_text(
        f"resources:\n  - {v2}\n"
        "images:\n"
        "  - name: mrtr-worker\n    newName: registry.example.com/team/mrtr-worker\n"
        "  - name: mrtr-lb\n    newName: registry.example.com/team/mrtr-lb\n    newTag: '2026.1'\n"
    )
    manifests = render(kubectl_path, overlay)
    assert container(find(manifests, "Deployment", "worker"), "worker")["image"] == (
        "registry.example.com/team/mrtr-worker:v2"
    )
    assert container(find(manifests, "Deployment", "lb"), "lb")["image"] == "registry.example.com/team/mrtr-lb:2026.1"
