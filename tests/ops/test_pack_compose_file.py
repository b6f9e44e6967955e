"""The packs' compose files and images, read offline: the fleet each describes is the fleet plus the pack.

Two directories build a worker image FROM the fleet's: the example pack (`examples/collatz-pack`) and the
test packs (`testpacks/`, the conformance and chaos packs, which the product's image does not carry).
`tests/e2e/compose/pack/` runs the example's (`scripts/compose-e2e`); these checks keep the files in step with
the project's own compose files and build script on every run of the quick suite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.ops.k8s.objects import compose_value, dockerfile_user
from tests.support.compose_files import FILES, compose_project
from tests.support.paths import ROOT


@dataclass(frozen=True)
class PackDir:
    directory: str
    image: str
    """The pack's worker image, tagged like the fleet's (`:v1`, `:v2`)."""
    wheel: str
    """The file name prefix of the package's wheel in build/wheelhouse/."""
    package: str
    """The package's name for `scripts/build-images` (`mrtr-<package>`)."""
    packs: tuple[str, ...]
    """What its workers serve by default."""

    @property
    def compose_file(self) -> str:
        return f"{self.directory}/compose.yaml"


PACK_DIRS = [
    PackDir("examples/collatz-pack", "mrtr-worker-collatz", "mrtr_example_pack", "example-pack",
            ("demo", "compute", "collatz")),
    PackDir("testpacks", "mrtr-worker-testpacks", "mrtr_test_packs", "test-packs", ("demo", "compute", "conformance")),
]  # fmt: skip


@pytest.fixture(scope="module")
def fleet() -> dict[str, Any]:
    services: dict[str, Any] = compose_project()["services"]
    return services


def _with_pack(pack: PackDir) -> dict[str, Any]:
    services: dict[str, Any] = compose_project(files=(*FILES, pack.compose_file))["services"]
    return services


@pytest.mark.parametrize("pack", PACK_DIRS, ids=lambda pack: pack.directory)
@pytest.mark.parametrize(("service", "version"), [("worker", "v1"), ("worker-v2", "v2")])
def test_each_worker_service_runs_the_pack_image_built_from_its_own_worker_image(
    pack: PackDir, service: str, version: str
) -> None:
    worker = _with_pack(pack)[service]
    assert worker["image"] == f"{pack.image}:{version}"
    assert worker["build"]["dockerfile"] == f"{pack.directory}/Dockerfile"
    assert worker["build"]["args"]["WORKER_IMAGE"] == f"mrtr-worker:{version}"
    packs = compose_value(worker["environment"]["MRTR_WORKER_TOOL_PACKS"]).split(",")
    assert tuple(packs) == pack.packs


@pytest.mark.parametrize("pack", PACK_DIRS, ids=lambda pack: pack.directory)
@pytest.mark.parametrize("service", ["worker", "worker-v2"])
def test_the_pack_changes_nothing_else_of_the_workers(fleet: dict[str, Any], pack: PackDir, service: str) -> None:
    def rest(definition: dict[str, Any]) -> dict[str, Any]:
        environment = {k: v for k, v in definition["environment"].items() if k != "MRTR_WORKER_TOOL_PACKS"}
        kept = {k: v for k, v in definition.items() if k not in ("image", "build", "environment")}
        return {**kept, "environment": environment}

    with_pack = _with_pack(pack)
    assert rest(with_pack[service]) == rest(fleet[service])
    assert set(with_pack) == set(fleet)


@pytest.mark.parametrize("pack", PACK_DIRS, ids=lambda pack: pack.directory)
def test_the_image_is_the_worker_image_plus_the_packs_wheel_as_the_same_user(pack: PackDir) -> None:
    dockerfile = ROOT / pack.directory / "Dockerfile"
    assert "FROM ${WORKER_IMAGE}" in dockerfile.read_text()
    assert f"COPY build/wheelhouse/{pack.wheel}-*.whl" in dockerfile.read_text()
    assert dockerfile_user(dockerfile) == dockerfile_user(ROOT / "services" / "worker" / "Dockerfile")
    script = (ROOT / "scripts" / "build-images").read_text().splitlines()
    (loop,) = [line for line in script if "for package in" in line]
    built = loop.split("for package in ", 1)[1].split(";", 1)[0].split()
    assert pack.package in built  # its wheel is built into build/wheelhouse/ with the fleet's


def test_the_product_image_installs_the_worker_alone() -> None:
    """The fleet's worker image installs the protocol's and the worker's wheels: no pack package, no test pack."""
    dockerfile = (ROOT / "services" / "worker" / "Dockerfile").read_text()
    wheels = sorted(word for word in dockerfile.split() if word.startswith("/tmp/wheelhouse/mrtr_"))
    assert wheels == ["/tmp/wheelhouse/mrtr_protocol-*.whl", "/tmp/wheelhouse/mrtr_worker-*.whl"]
