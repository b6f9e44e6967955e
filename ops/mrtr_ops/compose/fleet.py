"""The compose cluster's workers as a `Fleet`: containers of the services `worker` (v1) and `worker-v2`.

Starting a worker scales its service up by one (`docker compose up --scale`,
never recreating the others) and waits until the container is healthy and in
the proxy's rotation; draining one stops its container (SIGTERM: the worker
hands its computations back and exits) and removes it. The key ring file is
the compose secret, bind-mounted into every worker.

Compose keeps a desired state (`replicas: ${MRTR_WORKERS:-3}` of `worker`):
after every change the fleet writes the new counts (`MRTR_WORKERS`,
`MRTR_V2_WORKERS`) into the project's `.env`, so a later `docker compose up`
keeps the upgraded fleet instead of bringing version 1 back beside it (which
would meet states in a layout it cannot read).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import docker
from docker.models.containers import Container

from mrtr_ops.fleet import FleetWorker
from mrtr_ops.lb_admin import LbAdmin
from mrtr_ops.local.process import NotReady

SERVICE_OF_VERSION = {1: "worker", 2: "worker-v2"}
VERSION_OF_SERVICE = {service: version for version, service in SERVICE_OF_VERSION.items()}
WRITE_FORMAT_VARIABLE = {2: "MRTR_V2_WRITE_STATE_FORMAT"}
"""The compose variable that carries a new instance's state write format, per version."""
ROTATION_SECONDS = 60.0
"""How long a healthy new container may take to join the proxy's rotation (its discovery and health checks)."""
LB_ADMIN_PORT = 8090
"""The proxy's admin listener in its container: not published, reached at the container's address."""


class ComposeFleet:
    def __init__(self, root: Path, project: str, lb_url: str) -> None:
        self._root = root
        self._project = project
        self._engine = docker.from_env()
        self.lb_public_url = lb_url
        """The proxy as published on this host (where users and the load go)."""
        self.lb = LbAdmin(self.lb_admin_url(), self._admin_token())
        """The proxy's admin API: its admin listener, at the `lb` container's address, with the fleet's token."""

    def lb_admin_url(self) -> str:
        """The `lb` container's admin listener: its port is not published, so its address on the project network."""
        running = self._containers("lb")
        if not running:
            raise NotReady(f"no running lb container in compose project {self._project!r}")
        return f"http://{_address(running[0])}:{LB_ADMIN_PORT}"

    @property
    def keyring_file(self) -> Path:
        return self._root / "secrets" / "keyring.json"

    def workers(self) -> list[FleetWorker]:
        return [self._as_worker(c) for service in VERSION_OF_SERVICE for c in self._containers(service)]

    def start_worker(self, version: int, env: dict[str, str]) -> FleetWorker:
        service = SERVICE_OF_VERSION[version]
        before = {c.id for c in self._containers(service)}
        variables = dict(os.environ)
        if version in WRITE_FORMAT_VARIABLE and "MRTR_WORKER_WRITE_STATE_FORMAT" in env:
            variables[WRITE_FORMAT_VARIABLE[version]] = env["MRTR_WORKER_WRITE_STATE_FORMAT"]
        scale = f"{service}={len(before) + 1}"
        subprocess.run(
            ["docker", "compose", "-p", self._project, "up", "-d", "--wait", "--no-deps", "--no-recreate",
             "--scale", scale, service],
            cwd=self._root, env=variables, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        new = [c for c in self._containers(service) if c.id not in before]
        if len(new) != 1:
            raise NotReady(f"expected one new {service} container, found {len(new)}")
        worker = self._as_worker(new[0])
        self.lb.wait_for_backend(worker.admin_url, timeout=ROTATION_SECONDS)
        self._persist_counts()
        return worker

    def drain_worker(self, instance_id: str) -> None:
        container = self._engine.containers.get(instance_id)
        container.stop(timeout=30)
        container.remove()
        self._persist_counts()

    # --- helpers ---------------------------------------------------------------------------------------

    def _persist_counts(self) -> None:
        counts = {
            "MRTR_WORKERS": len(self._containers("worker")),
            "MRTR_V2_WORKERS": len(self._containers("worker-v2")),
        }
        update_env_file(self._root / ".env", {key: str(value) for key, value in counts.items()})

    def _containers(self, service: str) -> list[Container]:
        labels = [f"com.docker.compose.project={self._project}", f"com.docker.compose.service={service}"]
        found: list[Container] = self._engine.containers.list(filters={"label": labels, "status": "running"})
        return found

    def _as_worker(self, container: Container) -> FleetWorker:
        service = container.labels["com.docker.compose.service"]
        url = f"http://{_address(container)}:8000"
        return FleetWorker(container.short_id, VERSION_OF_SERVICE[service], url, self._admin_token())

    def _admin_token(self) -> str | None:
        """The operator's token compose gives the workers (secrets/admin-token), if this checkout has one."""
        path = self._root / "secrets" / "admin-token"
        return path.read_text().strip() if path.exists() else None


def _address(container: Container) -> str:
    """The container's address on its (first) network: this host reaches it there."""
    networks: dict[str, Any] = container.attrs["NetworkSettings"]["Networks"]
    return str(next(iter(networks.values()))["IPAddress"])


def update_env_file(path: Path, values: dict[str, str]) -> None:
    """Set `KEY=value` lines in a compose `.env` file, keeping every other line as it is."""
    lines = path.read_text().splitlines() if path.exists() else []
    kept = [line for line in lines if line.split("=", 1)[0].strip() not in values]
    path.write_text("\n".join([*kept, *(f"{key}={value}" for key, value in values.items())]) + "\n")
