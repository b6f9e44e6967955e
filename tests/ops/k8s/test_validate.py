"""Every kustomization renders with the real kustomize and every object is valid for Kubernetes 1.37.

The validator is shown to bite: the same worker Deployment broken in several ways must fail, and
so must a kustomization on disk through the `scripts/k8s-validate` entry point.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mrtr_ops.k8s.render import KUSTOMIZATIONS, Manifest, validate_all, validation_errors
from tests.ops.k8s.objects import container, find
from tests.support.paths import ROOT

_FLEET = {"Namespace", "Deployment", "StatefulSet", "Service", "PodDisruptionBudget", "NetworkPolicy"}
EXPECTED_OBJECTS = {
    "overlays/v1": _FLEET,
    "overlays/v2": _FLEET,
    "overlays/v1-redis-ha": _FLEET,
    "overlays/v2-redis-ha": _FLEET,
    "overlays/v1-monitoring": _FLEET | {"ConfigMap"},
    "overlays/v2-monitoring": _FLEET | {"ConfigMap"},
    "loadtest": {"Namespace", "Deployment", "Service", "ConfigMap"},
}


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_object_is_valid(rendered: dict[str, list[Manifest]], name: str) -> None:
    manifests = rendered[name]
    assert {m["kind"] for m in manifests} == EXPECTED_OBJECTS[name]
    assert validate_all(manifests) == []


def _set_replicas_text(d: Manifest) -> None:
    d["spec"]["replicas"] = "three"


def _misspell_field(d: Manifest) -> None:
    worker = container(d, "worker")
    worker["imagePullPolcy"] = worker.pop("imagePullPolicy")


def _drop_container_name(d: Manifest) -> None:
    del container(d, "worker")["name"]


def _drop_selector(d: Manifest) -> None:
    del d["spec"]["selector"]


def _probe_port_as_list(d: Manifest) -> None:
    container(d, "worker")["readinessProbe"]["httpGet"]["port"] = [8000]


def _strategy_in_pod_spec(d: Manifest) -> None:
    d["spec"]["template"]["spec"]["strategy"] = d["spec"]["strategy"]


def _unknown_kind(d: Manifest) -> None:
    d["kind"] = "Deploymnet"


BREAKAGES: dict[str, Callable[[Manifest], None]] = {
    "replicas is a string": _set_replicas_text,
    "misspelt field": _misspell_field,
    "container without a name": _drop_container_name,
    "no selector": _drop_selector,
    "probe port of the wrong type": _probe_port_as_list,
    "field at the wrong level": _strategy_in_pod_spec,
    "unknown kind": _unknown_kind,
}


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_broken_manifest_fails(rendered: dict[str, list[Manifest]], breakage: str) -> None:
    deployment = copy.deepcopy(find(rendered["overlays/v1"], "Deployment", "worker"))
    assert validation_errors(deployment) == []
    BREAKAGES[breakage](deployment)
    errors = validation_errors(deployment)
    assert len(errors) == 1
    assert errors[0].startswith("Deployment/mrtr/worker: ") or breakage == "unknown kind"


BROKEN_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: broken
spec:
  replicas: 1
  selector:
    matchLabels: {app: broken}
  template:
    metadata:
      labels: {app: broken}
    spec:
      containers:
        - name: broken
          image: busybox
          ports:
            - containerPort: "http"
"""


def _validate_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mrtr_ops.k8s", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_the_validate_command_fails_on_a_broken_kustomization(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources:\n  - deployment.yaml\n")
    (tmp_path / "deployment.yaml").write_text(BROKEN_DEPLOYMENT)
    done = _validate_cli(str(tmp_path))
    assert done.returncode == 1
    assert "FAIL" in done.stdout
    assert "containerPort" in done.stdout


def test_the_validate_command_fails_when_kustomize_refuses(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources:\n  - missing.yaml\n")
    done = _validate_cli(str(tmp_path))
    assert done.returncode == 1
    assert "missing.yaml" in done.stdout


def test_the_validate_command_passes_and_writes_the_renderings(tmp_path: Path) -> None:
    done = _validate_cli("--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{k.replace('/', '-')}.yaml" for k in KUSTOMIZATIONS)
    assert "overlays-v1.yaml" in {p.name for p in tmp_path.iterdir()}
    assert done.stdout.count("ok   ") == len(KUSTOMIZATIONS)
