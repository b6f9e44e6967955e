"""Fixtures: the pinned kubectl (installed by scripts/k8s-tools on first use) and every kustomization rendered once."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from mrtr_dev_issuer import DevIssuer
from mrtr_ops.k8s.render import KUSTOMIZATIONS, Manifest, kubectl, render
from mrtr_worker.sealing.keyring import new_ring
from tests.support.paths import MANIFESTS


@pytest.fixture(scope="session")
def kubectl_path() -> Path:
    return kubectl()


@pytest.fixture(scope="session")
def rendered(kubectl_path: Path) -> dict[str, list[Manifest]]:
    """`overlays/v1`, `overlays/v2` and `loadtest`, as `kubectl kustomize` renders them."""
    return {name: render(kubectl_path, MANIFESTS / name) for name in KUSTOMIZATIONS}


@pytest.fixture(params=["overlays/v1", "overlays/v2"])
def cluster(request: pytest.FixtureRequest, rendered: dict[str, list[Manifest]]) -> list[Manifest]:
    """The cluster as each version's overlay renders it."""
    manifests: list[Manifest] = rendered[request.param]
    return manifests


@pytest.fixture
def secrets_dir(tmp_path: Path) -> Path:
    """The files `scripts/compose-secrets` makes: key ring, development issuer key pair, admin token."""
    directory = tmp_path / "secrets"
    directory.mkdir()
    (directory / "keyring.json").write_text(new_ring("k8s-1").dumps())
    DevIssuer.generate().write(directory)
    (directory / "admin-token").write_text(secrets.token_urlsafe(32))
    return directory
