"""The chaos run's faults on the compose cluster's containers, through the Docker SDK.

* kill9: `container.kill("SIGKILL")`. Docker treats an explicit kill like a
  stop, so the `unless-stopped` policy does not bring it back; `restart`
  starts the same container again (a supervisor's restart: same name, same
  DNS alias, a new process), and waits until the proxy has it in rotation.
* pause: `container.pause()`, the cgroup freezer: every process of the
  container stops at once (the worker and its step pool), sockets stay open.
* cut: `network.disconnect` from the project network: the container keeps
  running but no packet reaches it, and it leaves the network's DNS, so the
  proxy's discovery drops it; `restore` connects it again with the aliases it
  had (`worker`), and the proxy finds it (maybe at a new address) by DNS.
* drain and the replacement: `ComposeFleet.drain_worker` (SIGTERM: the
  worker drains) and `start_worker` (the service scaled up by one).
* redis: `container.restart()` of the `redis` service (SIGTERM writes its
  append-only file out; the same volume comes back), then its health check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docker.models.containers import Container

from mrtr_ops.compose.fleet import ROTATION_SECONDS, ComposeFleet
from mrtr_ops.waiting import wait_until

WORKER_PORT = 8000
DOCKER_SECONDS = 60.0
"""How long a container may take to die, to be healthy again, or to get an address."""


class ComposeChaosFleet(ComposeFleet):
    def __init__(self, root: Path, project: str, lb_url: str) -> None:
        super().__init__(root, project, lb_url)
        self._cut: dict[str, tuple[str, list[str]]] = {}
        """instance -> (network name, aliases) while it is cut off."""

    @property
    def lb_url(self) -> str:
        return self.lb_public_url

    def backend_url(self, instance_id: str) -> str:
        container = self._container(instance_id)
        networks: dict[str, Any] = container.attrs["NetworkSettings"]["Networks"]
        addresses = [n["IPAddress"] for n in networks.values() if n.get("IPAddress")]
        return f"http://{addresses[0]}:{WORKER_PORT}" if addresses else ""

    def process_id(self, instance_id: str) -> int | None:
        state = self._container(instance_id).attrs["State"]
        return int(state["Pid"]) if state.get("Running") and state.get("Pid") else None

    def kill9(self, instance_id: str) -> None:
        container = self._container(instance_id)
        container.kill(signal="SIGKILL")
        wait_until(
            lambda: not self._container(instance_id).attrs["State"]["Running"],
            timeout=DOCKER_SECONDS,
            interval=0.1,
            what=f"{instance_id} to die",
        )

    def restart(self, instance_id: str) -> None:
        container = self._container(instance_id)
        if not container.attrs["State"]["Running"]:
            container.start()
        wait_until(
            lambda: self._healthy(instance_id),
            timeout=DOCKER_SECONDS,
            interval=0.1,
            what=f"{instance_id} to be healthy again",
        )
        self.lb.wait_for_backend(self.backend_url(instance_id), timeout=ROTATION_SECONDS)

    def pause(self, instance_id: str) -> None:
        self._container(instance_id).pause()

    def resume(self, instance_id: str) -> None:
        self._container(instance_id).unpause()

    def cut(self, instance_id: str) -> None:
        container = self._container(instance_id)
        networks: dict[str, Any] = container.attrs["NetworkSettings"]["Networks"]
        name, settings = next(iter(networks.items()))
        service = container.labels["com.docker.compose.service"]
        aliases = sorted({service, "worker", *(settings.get("Aliases") or [])} - {container.id, container.short_id})
        self._cut[instance_id] = (name, aliases)
        self._engine.networks.get(name).disconnect(container)

    def restore(self, instance_id: str) -> None:
        name, aliases = self._cut.pop(instance_id)
        self._engine.networks.get(name).connect(self._container(instance_id), aliases=aliases)
        wait_until(
            lambda: bool(self.backend_url(instance_id)),
            timeout=DOCKER_SECONDS,
            interval=0.1,
            what=f"{instance_id} to get an address",
        )

    def store_pid(self) -> int | None:
        state = self._store().attrs["State"]
        return int(state["Pid"]) if state.get("Running") and state.get("Pid") else None

    def restart_store(self) -> None:
        """`docker restart` of the `redis` service's container: SIGTERM (its append-only file is written out),
        then the same container and volume again; returns once its health check passes."""
        self._store().restart(timeout=30)
        wait_until(
            lambda: (
                (state := self._store().attrs["State"]).get("Running")
                and state.get("Health", {}).get("Status", "healthy") == "healthy"
            ),
            timeout=DOCKER_SECONDS,
            interval=0.1,
            what="Redis to be healthy again",
        )

    # --- helpers ---------------------------------------------------------------------------------------

    def _store(self) -> Container:
        labels = [f"com.docker.compose.project={self._project}", "com.docker.compose.service=redis"]
        found: list[Container] = self._engine.containers.list(all=True, filters={"label": labels})
        if not found:
            raise RuntimeError(f"compose project {self._project!r} has no redis container")
        return found[0]

    def _container(self, instance_id: str) -> Container:
        container: Container = self._engine.containers.get(instance_id)
        return container

    def _healthy(self, instance_id: str) -> bool:
        state = self._container(instance_id).attrs["State"]
        return bool(state.get("Running")) and state.get("Health", {}).get("Status") == "healthy"
