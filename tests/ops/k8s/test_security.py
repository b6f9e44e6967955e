"""Every pod runs as the images' non-root user, read-only, without privileges, within stated resources."""

from __future__ import annotations

import re
from typing import Any

import pytest

from mrtr_ops.k8s.render import KUSTOMIZATIONS, Manifest
from tests.ops.k8s.objects import compose, compose_value, dockerfile_user, pod_spec, workloads
from tests.support.paths import ROOT

_UNITS = {"": 1.0, "m": 1e-3, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30}


def quantity(text: str | int) -> float:
    """A Kubernetes quantity in base units (cores, bytes); only the suffixes these manifests use."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(m|Ki|Mi|Gi)?", str(text))
    assert match, f"unexpected quantity {text!r}"
    return float(match.group(1)) * _UNITS[match.group(2) or ""]


def image_users() -> dict[str, str]:
    """Image name -> the user its Dockerfile runs as, for every image compose builds."""
    users = {}
    for service in compose()["services"].values():
        if "build" in service:
            dockerfile = ROOT / service["build"]["dockerfile"]
            users[compose_value(service["image"])] = dockerfile_user(dockerfile)
    return users


def _pods(rendered: dict[str, list[Manifest]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{name}:{w['metadata']['name']}", pod_spec(w)) for name in KUSTOMIZATIONS for w in workloads(rendered[name])
    ]


def test_every_image_is_one_compose_builds_and_runs_as_its_user(rendered: dict[str, list[Manifest]]) -> None:
    users = image_users()
    for where, pod in _pods(rendered):
        security = pod["securityContext"]
        assert security["runAsNonRoot"] is True, where
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}, where
        for spec in pod["containers"]:
            assert spec["image"] in users, (where, spec["image"])
            assert str(security["runAsUser"]) == users[spec["image"]] == "10001", where
            assert spec["imagePullPolicy"] == "IfNotPresent", where


def test_no_privileges_and_a_read_only_root(rendered: dict[str, list[Manifest]]) -> None:
    for where, pod in _pods(rendered):
        assert pod["automountServiceAccountToken"] is False, where
        assert pod["enableServiceLinks"] is False, where
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for spec in pod["containers"]:
            security = spec["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["readOnlyRootFilesystem"] is True, where
            assert security["capabilities"] == {"drop": ["ALL"]}, where
            tmp = [m for m in spec.get("volumeMounts", []) if m["mountPath"] == "/tmp"]
            assert len(tmp) == 1, where
            assert "emptyDir" in volumes[tmp[0]["name"]], where


@pytest.mark.parametrize("resource", ["cpu", "memory"])
def test_requests_and_limits(rendered: dict[str, list[Manifest]], resource: str) -> None:
    for where, pod in _pods(rendered):
        for spec in pod["containers"]:
            request = quantity(spec["resources"]["requests"][resource])
            limit = quantity(spec["resources"]["limits"][resource])
            assert 0 < request <= limit, where


def test_quantities_are_read_right() -> None:
    assert quantity("500m") == 0.5
    assert quantity("2") == 2
    assert quantity("256Mi") == 256 * 2**20
    assert quantity("1Gi") == 2**30
