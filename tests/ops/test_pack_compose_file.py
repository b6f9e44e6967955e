"""The example pack's compose file and image, read offline: the fleet it describes is the fleet plus the pack.

`tests/e2e/compose/pack/` runs it (`scripts/compose-e2e`); these checks keep the files in step with the
project's own compose files and build script on every run of the quick suite.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.ops.k8s.objects import compose_value, dockerfile_user
from tests.support.compose_files import FILES, compose_project
from tests.support.paths import ROOT

PACK_DIR = ROOT / "examples" / "collatz-pack"
PACK_FILE = "examples/collatz-pack/compose.yaml"


@pytest.fixture(scope="module")
def fleet() -> dict[str, Any]:
    services: dict[str, Any] = compose_project()["services"]
    return services


@pytest.fixture(scope="module")
def with_pack() -> dict[str, Any]:
    services: dict[str, Any] = compose_project(files=(*FILES, PACK_FILE))["services"]
    return services


@pytest.mark.parametrize(("service", "version"), [("worker", "v1"), ("worker-v2", "v2")])
def test_each_worker_service_runs_the_pack_image_built_from_its_own_worker_image(
    with_pack: dict[str, Any], service: str, version: str
) -> None:
    worker = with_pack[service]
    assert worker["image"] == f"mrtr-worker-collatz:{version}"
    assert worker["build"]["dockerfile"] == "examples/collatz-pack/Dockerfile"
    assert worker["build"]["args"]["WORKER_IMAGE"] == f"mrtr-worker:{version}"
    packs = compose_value(worker["environment"]["MRTR_WORKER_TOOL_PACKS"]).split(",")
    assert packs == ["demo", "compute", "collatz"]


@pytest.mark.parametrize("service", ["worker", "worker-v2"])
def test_the_pack_changes_nothing_else_of_the_workers(
    fleet: dict[str, Any], with_pack: dict[str, Any], service: str
) -> None:
    def rest(definition: dict[str, Any]) -> dict[str, Any]:
        environment = {k: v for k, v in definition["environment"].items() if k != "MRTR_WORKER_TOOL_PACKS"}
        kept = {k: v for k, v in definition.items() if k not in ("image", "build", "environment")}
        return {**kept, "environment": environment}

    assert rest(with_pack[service]) == rest(fleet[service])
    assert set(with_pack) == set(fleet)


def test_the_image_is_the_worker_image_plus_the_packs_wheel_as_the_same_user() -> None:
    dockerfile = (PACK_DIR / "Dockerfile").read_text()
    assert "FROM ${WORKER_IMAGE}" in dockerfile
    assert "COPY build/wheelhouse/mrtr_example_pack-*.whl" in dockerfile
    assert dockerfile_user(PACK_DIR / "Dockerfile") == dockerfile_user(ROOT / "services" / "worker" / "Dockerfile")
    wheels = (ROOT / "scripts" / "build-images").read_text()
    assert "for package in protocol worker lb client dev-issuer loadtest example-pack; do" in wheels
