"""A stack on the local Docker Swarm: changed with the documented commands, watched through the SDK.

The actions are the `docker` commands docs/swarm.md gives a newcomer
(`docker stack deploy`, `docker service update --image`, `docker service
rollback`, `docker service scale`, `docker stack rm`), so what the end-to-end
check exercises is what the documentation says; the Docker SDK has no stacks
and no rollback action anyway. Everything observed (tasks, update status, the
end of a task) goes through the Docker SDK and `mrtr_ops.swarm.tasks`.
Every wait polls a condition until a deadline (`mrtr_ops.waiting.wait_until`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import docker
from docker.models.services import Service

from mrtr_ops.swarm.tasks import Task, UpdateStatus, converged, parse_task, parse_update_status
from mrtr_ops.waiting import wait_until

STACK_LABEL = "com.docker.stack.namespace"


POLL_SECONDS = 0.5
"""How often a wait asks the swarm again."""

LB_BACKENDS_SCRIPT = (
    "import os, sys, urllib.request as u; "
    "t = open(os.environ['MRTR_LB_ADMIN_TOKEN_FILE']).read().strip(); "
    "p = os.environ.get('MRTR_LB_ADMIN_PORT', '8090'); "
    "r = u.Request(f'http://127.0.0.1:{p}/lb/backends', headers={'Authorization': 'Bearer ' + t}); "
    "sys.stdout.write(u.urlopen(r, timeout=5).read().decode())"
)
"""Run inside the proxy's container: its admin listener is not published, and the token is its secret."""


class LbUnreachable(RuntimeError):
    """The proxy's admin API did not answer (no running proxy task yet, or it is starting)."""


def port_taken(port: int) -> bool:
    """Whether something on this node already listens on `port` (a host-mode port binds every address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def swarm_state(engine: docker.DockerClient) -> str:
    """This engine's swarm membership: `inactive`, `active`, `pending`, `error` or `locked`."""
    return str(engine.info()["Swarm"]["LocalNodeState"])


class SwarmStack:
    def __init__(
        self,
        name: str,
        root: Path,
        env: Mapping[str, str] | None = None,
        engine: docker.DockerClient | None = None,
    ) -> None:
        self.name = name
        self._root = root
        self.env = dict(env or {})
        """Variables for the compose files' interpolation (added to this process's environment)."""
        self._engine = engine or docker.from_env()

    def qualified(self, service: str) -> str:
        """`worker` -> `<stack>_worker`, the name `docker service ...` takes."""
        return f"{self.name}_{service}"

    # --- actions: the documented commands ------------------------------------------------------------

    def _docker(self, *args: str) -> None:
        subprocess.run(
            ["docker", *args], cwd=self._root, env={**os.environ, **self.env}, check=True, stdout=subprocess.DEVNULL
        )

    def deploy(self, *files: str) -> None:
        """`docker stack deploy` of these compose files; services already deployed with the same spec stay untouched.

        `--resolve-image never`: the images are local (or given by ID); no registry is asked.
        """
        compose_files = [arg for file in files for arg in ("-c", file)]
        self._docker("stack", "deploy", "--detach=true", "--resolve-image", "never", *compose_files, self.name)

    def update_image(self, service: str, image: str) -> float:
        """`docker service update --image`: the swarm's rolling update. Returns when it was asked for."""
        asked = time.time()
        self._docker("service", "update", "--detach", "--no-resolve-image", "--image", image, self.qualified(service))
        return asked

    def rollback(self, service: str) -> float:
        """`docker service rollback`: back to the previous spec, with the service's rollback_config."""
        asked = time.time()
        self._docker("service", "rollback", "--detach", self.qualified(service))
        return asked

    def scale(self, service: str, replicas: int) -> None:
        self._docker("service", "scale", "--detach", f"{self.qualified(service)}={replicas}")

    def remove(self, timeout: float = 90.0, *, volumes: bool = True) -> None:
        """`docker stack rm`, then wait until its containers and networks are gone (a redeploy would race them).

        `docker stack rm` keeps the stack's volumes (Redis's data); with `volumes` they go too, so the
        next deploy starts with an empty task store.
        """
        if self.exists():
            self._docker("stack", "rm", self.name)
        label: dict[str, str | list[str] | bool] = {"label": f"{STACK_LABEL}={self.name}"}
        wait_until(
            lambda: (
                not self._engine.containers.list(all=True, filters=label, sparse=True, ignore_removed=True)
                and not self._engine.networks.list(filters=label)
            ),
            timeout=timeout,
            interval=POLL_SECONDS,
            what=f"the containers and networks of stack {self.name} to go",
        )
        if volumes:
            for volume in self._engine.volumes.list(filters=label):
                volume.remove()

    # --- observations --------------------------------------------------------------------------------

    def exists(self) -> bool:
        return bool(self._engine.services.list(filters={"label": f"{STACK_LABEL}={self.name}"}))

    def service(self, service: str) -> Service:
        found: Service = self._engine.services.get(self.qualified(service))  # type: ignore[no-untyped-call]  # untyped stub
        return found

    def spec(self, service: str) -> dict[str, Any]:
        spec: dict[str, Any] = self.service(service).attrs["Spec"]
        return spec

    def tasks(self, service: str) -> list[Task]:
        raw_tasks: list[dict[str, Any]] = self.service(service).tasks()  # type: ignore[no-untyped-call]  # untyped stub
        return [parse_task(raw) for raw in raw_tasks]

    def update_status(self, service: str) -> UpdateStatus:
        return parse_update_status(self.service(service).attrs)

    def image(self, service: str) -> str:
        """The image the service's spec names now (what new tasks get)."""
        return str(self.service(service).attrs["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"])

    def replicas(self, service: str) -> int:
        return int(self.service(service).attrs["Spec"]["Mode"]["Replicated"]["Replicas"])

    def lb_backends(self) -> list[dict[str, Any]]:
        """The proxy's `/lb/backends`, asked inside its container (`docker exec`): the admin port is not published."""
        task = next((t for t in self.tasks("lb") if t.running and t.container_id), None)
        if task is None:
            raise LbUnreachable(f"{self.qualified('lb')} has no running task")
        try:
            proxy = self._engine.containers.get(task.container_id)
            code, output = proxy.exec_run(["python3", "-c", LB_BACKENDS_SCRIPT])
        except docker.errors.APIError as exc:
            raise LbUnreachable(str(exc)) from exc
        assert isinstance(output, bytes)  # not streamed
        if code != 0:
            raise LbUnreachable(output.decode(errors="replace")[-500:])
        listing: list[dict[str, Any]] = json.loads(output)
        return listing

    # --- waits ---------------------------------------------------------------------------------------

    def wait_converged(self, service: str, timeout: float = 120.0) -> None:
        """Every replica runs (and, with a healthcheck, is healthy) on the image the spec names."""
        wait_until(
            lambda: converged(self.tasks(service), self.image(service), self.replicas(service)),
            timeout=timeout,
            interval=POLL_SECONDS,
            what=f"{self.qualified(service)} to run its replicas of the image its spec names",
        )

    def wait_update(self, service: str, asked: float, timeout: float = 300.0) -> UpdateStatus:
        """Wait until the update (or rollback) asked for at `asked` has finished; return how it ended."""

        def finished() -> UpdateStatus | None:
            status = self.update_status(service)
            return status if status.started >= asked - 1.0 and status.done else None

        return wait_until(
            finished, timeout=timeout, interval=1.0, what=f"the update of {self.qualified(service)} to finish"
        )

    def signal(self, service: str, signal: str = "SIGTERM") -> None:
        """Send a signal to the containers of the service's running tasks (a swarm has no command for it)."""
        for task in self.tasks(service):
            if task.running and task.container_id:
                self._engine.containers.get(task.container_id).kill(signal=signal)

    def wait_done(self, service: str, timeout: float) -> list[Task]:
        """Wait until every task of a run-once service has exited; return them, last exit first."""

        def exited() -> list[Task]:
            tasks = self.tasks(service)
            stopped = sorted((t for t in tasks if t.stopped), key=lambda t: t.changed, reverse=True)
            done = all(t.exit_code is not None for t in stopped) and not any(t.running for t in tasks)
            return stopped if done else []

        return wait_until(exited, timeout=timeout, interval=1.0, what=f"the tasks of {self.qualified(service)} to exit")


def image_id(engine: docker.DockerClient, reference: str) -> str:
    """`mrtr-worker:v1` -> `sha256:...`: a swarm never tries to pull an image named by ID."""
    return str(engine.images.get(reference).id)
