"""Fixtures for the compose end-to-end checks: the running compose project, seen through its published ports."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import docker
import pytest
from docker.models.containers import Container

from mrtr_dev_issuer import DevIssuer
from mrtr_ops.lb_admin import LbAdmin
from tests.support.paths import ROOT

# `pack/` checks a fleet that serves the example tool pack (`scripts/up --with-pack examples/collatz-pack`):
# `scripts/compose-e2e` brings that fleet up after the others and runs them alone.
# `walkthrough/` runs the walkthrough on compose (it takes the fleet down and up again): alone, after the others.
collect_ignore = [] if os.environ.get("MRTR_COMPOSE_PACK_E2E") == "1" else ["pack"]
collect_ignore += [] if os.environ.get("MRTR_COMPOSE_WALKTHROUGH_E2E") == "1" else ["walkthrough"]


def compose(*args: str, env: dict[str, str] | None = None) -> None:
    """Run `docker compose ARGS` in the repository (the project name comes from the environment)."""
    subprocess.run(["docker", "compose", *args], cwd=ROOT, check=True, env={**os.environ, **(env or {})})


@pytest.fixture(scope="session")
def project() -> str:
    return os.environ["COMPOSE_PROJECT_NAME"]


@pytest.fixture(scope="session")
def issuer() -> DevIssuer:
    """The development issuer whose public key the compose workers trust."""
    return DevIssuer.load(ROOT / "secrets" / "issuer-private.pem")


@pytest.fixture(scope="session")
def token(issuer: DevIssuer) -> str:
    return issuer.mint("compose-e2e")


@pytest.fixture(scope="session")
def engine() -> docker.DockerClient:
    return docker.from_env()


@pytest.fixture(scope="session")
def lb_url() -> str:
    return f"http://127.0.0.1:{os.environ.get('MRTR_PORT', '8080')}"


@pytest.fixture(scope="session")
def haproxy_url() -> str:
    """Starts the `haproxy` profile on first use."""
    compose("--profile", "haproxy", "up", "-d", "--wait", "haproxy")
    return f"http://127.0.0.1:{os.environ.get('MRTR_HAPROXY_PORT', '8081')}"


@pytest.fixture(scope="session")
def prometheus_url() -> str:
    """Starts the `monitoring` profile (Prometheus and the Redis exporter) on first use."""
    compose("--profile", "monitoring", "up", "-d", "--wait", "prometheus")
    return f"http://127.0.0.1:{os.environ.get('MRTR_PROMETHEUS_PORT', '9090')}"


@pytest.fixture
def balancer_url(request: pytest.FixtureRequest) -> str:
    """The entry point under test: our proxy or HAProxy (parametrize with `balancer`)."""
    url: str = request.getfixturevalue("lb_url" if request.param == "lb" else "haproxy_url")
    return url


ServiceContainers = Callable[[str], list[Container]]


@pytest.fixture
def containers(engine: docker.DockerClient, project: str) -> ServiceContainers:
    def running(service: str) -> list[Container]:
        labels = [f"com.docker.compose.project={project}", f"com.docker.compose.service={service}"]
        found: list[Container] = engine.containers.list(filters={"label": labels, "status": "running"})
        return found

    return running


def container_ip(container: Container) -> str:
    networks: dict[str, Any] = container.attrs["NetworkSettings"]["Networks"]
    return str(next(iter(networks.values()))["IPAddress"])


LB_ADMIN_PORT = 8090
"""The proxy's admin listener in its container: not published; this host reaches it at the container's address."""


@pytest.fixture(scope="session")
def admin_token() -> str:
    """The fleet's admin token (the compose secret `admin_token`): the workers' /admin and the proxy's admin."""
    return (ROOT / "secrets" / "admin-token").read_text().strip()


@pytest.fixture(scope="session")
def lb_admin_url(engine: docker.DockerClient, project: str) -> str:
    labels = [f"com.docker.compose.project={project}", "com.docker.compose.service=lb"]
    (proxy,) = engine.containers.list(filters={"label": labels, "status": "running"})
    return f"http://{container_ip(proxy)}:{LB_ADMIN_PORT}"


@pytest.fixture(scope="session")
def lb(lb_admin_url: str, admin_token: str) -> Iterator[LbAdmin]:
    """The proxy's admin API, on its admin listener with the fleet's token."""
    with LbAdmin(lb_admin_url, admin_token) as admin:
        yield admin
