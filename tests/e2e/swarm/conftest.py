"""Fixtures for the swarm end-to-end checks: one stack on the local swarm, seen through its published port.

`scripts/swarm-e2e` joins a swarm (if the engine is in none) and runs these
with MRTR_SWARM_E2E=1. The stack is deployed once per session from the
recipe's files and removed at the end, whatever happened.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from mrtr_dev_issuer import DevIssuer
from mrtr_ops.swarm.stack import SwarmStack, port_taken
from mrtr_ops.swarm.walkthrough import MONITORING_FILES, deploy_cluster, images
from tests.support.paths import ROOT


@pytest.fixture(scope="session")
def engine() -> docker.DockerClient:
    return docker.from_env()


@pytest.fixture(scope="session")
def lb_url() -> str:
    return f"http://127.0.0.1:{os.environ.get('MRTR_SWARM_PORT', '28080')}"


@pytest.fixture(scope="session")
def image_ids(engine: docker.DockerClient) -> dict[str, str]:
    """The images by ID (never pulled): MRTR_LB_IMAGE, MRTR_WORKER_IMAGE (v1), MRTR_WORKER_V2_IMAGE, ..."""
    return images(engine)


@pytest.fixture(scope="session")
def stack(engine: docker.DockerClient, lb_url: str, image_ids: dict[str, str]) -> Iterator[SwarmStack]:
    env = {
        key: value for key, value in image_ids.items() if key != "MRTR_WORKER_V2_IMAGE"
    } | {
        "MRTR_PORT": os.environ.get("MRTR_SWARM_PORT", "28080"),
        "MRTR_LOCUST_PORT": os.environ.get("MRTR_SWARM_LOCUST_PORT", "28089"),
        "MRTR_PROMETHEUS_PORT": os.environ.get("MRTR_SWARM_PROMETHEUS_PORT", "29090"),
        "MRTR_MAX_SLICE_MS": "500",  # short time slices: computations hop between tasks
    }  # fmt: skip
    swarm_stack = SwarmStack(os.environ.get("MRTR_SWARM_STACK", "mrtr-swarm-e2e"), ROOT, env, engine)
    swarm_stack.remove()  # whatever an interrupted run left
    ports = (env["MRTR_PORT"], env["MRTR_LOCUST_PORT"], env["MRTR_PROMETHEUS_PORT"])
    taken = [port for port in ports if port_taken(int(port))]
    assert not taken, f"ports {taken} are taken: set MRTR_SWARM_PORT / _LOCUST_PORT / _PROMETHEUS_PORT"
    try:
        # Prometheus and the exporter from the start: they watch the whole run, the rolling update included.
        deploy_cluster(swarm_stack, lb_url, files=MONITORING_FILES)
        yield swarm_stack
    finally:
        swarm_stack.remove()


@pytest.fixture(scope="session")
def prometheus_url(stack: SwarmStack) -> str:
    """The stack's Prometheus, published on the node (mode host)."""
    return f"http://127.0.0.1:{stack.env['MRTR_PROMETHEUS_PORT']}"


@pytest.fixture(scope="session")
def token() -> str:
    """A bearer token of the development issuer whose public key the stack's workers trust."""
    return DevIssuer.load(ROOT / "secrets" / "issuer-private.pem").mint("swarm-e2e")


@pytest.fixture(scope="session")
def out_dir() -> Path:
    return Path(os.environ.get("MRTR_SWARM_OUT", ROOT / "reports" / "swarm-e2e"))
