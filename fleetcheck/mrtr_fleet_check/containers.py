"""The server under test as containers of its image, the proxy as the project's `mrtr-lb` image, on Docker.

The only module that speaks to Docker (the Docker SDK, as `mrtr_ops.compose` does). Every run gets
a network of its own; each instance is a container on it, named `fleet-check-<run>-v1-0`, which is
how the proxy reaches it, and its port is published on 127.0.0.1, which is how the probes reach it.
The proxy's backends file is in a directory of the work dir mounted into the proxy's container.
Stopping is `docker stop` with the grace period (SIGTERM, SIGKILL after it), as compose and swarm
stop a replaced container; each container's output is saved in the work dir when it stops.
"""

from __future__ import annotations

import math
import secrets
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.models.containers import Container as DockerContainer
from docker.models.networks import Network

from mrtr_fleet_check.fleet import Fleet, Layout
from mrtr_fleet_check.instance import Instance, ServerFailed
from mrtr_fleet_check.proxy import Proxy, proxy_settings, write_backends
from mrtr_fleet_check.servers import LOOPBACK

PORT = 8000
"""The port a container of the server listens on unless `--container-port` says otherwise."""
PROXY_IMAGE = "mrtr-lb:latest"
"""The proxy's image, as `scripts/build-images` tags it."""
PROXY_PORT, PROXY_ADMIN_PORT = 8080, 8090
BACKENDS_DIR = "/fleet-check"
"""Where the proxy's container sees the work dir's `proxy/` directory (its backends file)."""
LABEL = "mrtr.fleet-check"
"""Every container and network of a run carries it, with the run's name."""


@dataclass(frozen=True)
class Images:
    """The server under test as images: each container listens on `container_port` (also `PORT`)."""

    v1: str
    v2: str
    container_port: int = PORT
    proxy_image: str = PROXY_IMAGE
    environment: Mapping[str, str] = field(default_factory=dict)
    """Given to every container of the server, beside `PORT`, `MCP_INSTANCE` and `MCP_VERSION`."""


def answers(port: int) -> bool:
    """Whether something listens behind a published port.

    Docker's port proxy accepts every connection on the host and closes it at once when nothing
    listens in the container, so a connect alone says nothing: a request must get a byte back, or
    at least not be closed (a server slow to answer `GET /`).
    """
    try:
        sock = socket.create_connection((LOOPBACK, port), timeout=1.0)
    except OSError:
        return False
    with sock:
        try:
            sock.sendall(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            return sock.recv(1) != b""
        except TimeoutError:
            return True
        except OSError:
            return False


class Container:
    """A container and the host port its `port` is published on; its output goes to `log` when it ends."""

    def __init__(self, container: DockerContainer, port: int, log_path: Path) -> None:
        self.container = container
        self.log = str(log_path)
        self._log_path = log_path
        self.host_port = self.published(port)

    def published(self, port: int) -> int:
        """The host port `port` is published on; `ServerFailed` (its output saved) if it has none: it exited."""
        self.container.reload()
        bindings = self.container.attrs["NetworkSettings"]["Ports"].get(f"{port}/tcp") or []
        for binding in bindings:
            if binding.get("HostIp") == LOOPBACK:
                return int(binding["HostPort"])
        self.save_log()
        raise ServerFailed(
            f"{self.container.name} has no port {port} published ({self.container.status}); see {self.log}"
        )

    def exited(self) -> int | None:
        self.container.reload()
        if self.container.status not in ("exited", "dead"):
            return None
        self.save_log()
        status: int = self.container.attrs["State"]["ExitCode"]
        return status

    def listening(self) -> bool:
        return answers(self.host_port)

    def stop(self, grace: float) -> None:
        self.container.stop(timeout=math.ceil(grace))
        self.save_log()

    def save_log(self) -> None:
        self._log_path.write_bytes(self.container.logs())


class ContainerFleet(Fleet):
    """Instances as containers of the `Images`, the proxy as its image, on a network of the run's own."""

    def __init__(self, layout: Layout, images: Images) -> None:
        super().__init__(layout)
        self.images = images
        self.run = f"fleet-check-{secrets.token_hex(3)}"
        try:
            self.docker = docker.from_env()
            self.docker.ping()
        except docker.errors.DockerException as exc:
            raise ServerFailed(f"cannot reach Docker ({exc}); is the engine running? (scripts/docker-setup)") from None
        for image in dict.fromkeys((images.v1, images.v2, images.proxy_image)):
            self._have(image)
        self.network: Network = self.docker.networks.create(self.run, labels={LABEL: self.run})
        self.started: list[tuple[DockerContainer, Path]] = []

    def _have(self, image: str) -> None:
        """`image` on the engine, pulled if it is not: before anything starts, not halfway through the update."""
        try:
            self.docker.images.get(image)
        except docker.errors.ImageNotFound:
            try:
                self.docker.images.pull(image)
            except docker.errors.APIError as exc:
                hint = "; scripts/build-images builds the proxy's" if image == self.images.proxy_image else ""
                raise ServerFailed(
                    f"no image {image!r} on this engine, and pulling it failed: {exc.explanation or exc}{hint}"
                ) from None

    def _run(
        self,
        image: str,
        name: str,
        ports: Sequence[int],
        environment: Mapping[str, str],
        volumes: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Container:
        """A container of `image` on the run's network, `ports` published on 127.0.0.1, the first one its own."""
        # (address, None): a free port of the host's, chosen by Docker (the SDK's stubs know only a number)
        published: dict[str, Any] = {f"{port}/tcp": (LOOPBACK, None) for port in ports}
        try:
            started: DockerContainer = self.docker.containers.run(
                image,
                name=f"{self.run}-{name}",
                network=self.network.name,
                labels={LABEL: self.run},
                detach=True,
                environment=dict(environment),
                ports=published,
                volumes={source: dict(bind) for source, bind in (volumes or {}).items()},
            )
        except docker.errors.DockerException as exc:
            raise ServerFailed(f"cannot start {name} from {image!r}: {exc}") from None
        log_path = self.layout.work_dir / f"{name}.log"
        self.started.append((started, log_path))
        return Container(started, ports[0], log_path)

    def start_instance(self, version: int, number: int) -> Instance:
        name = f"v{version}-{number}"
        port = self.images.container_port
        image = self.images.v1 if version == 1 else self.images.v2
        environment = {**self.images.environment, "PORT": str(port), "MCP_INSTANCE": name, "MCP_VERSION": str(version)}
        container = self._run(image, name, [port], environment)
        url = f"http://{LOOPBACK}:{container.host_port}"
        return Instance(name, version, url, f"http://{container.container.name}:{port}", container)

    def start_proxy(self, backends: Sequence[str]) -> Proxy:
        shared = self.layout.work_dir / "proxy"
        shared.mkdir(parents=True, exist_ok=True)
        shared.chmod(0o755)  # the proxy's image runs as a user of its own
        backends_file = shared / "backends.txt"
        write_backends(backends_file, backends)
        environment = {
            **proxy_settings(f"{BACKENDS_DIR}/backends.txt", self.layout.mcp_path),
            "MRTR_LB_ADMIN_HOST": "0.0.0.0",
            "MRTR_LB_ADMIN_PORT": str(PROXY_ADMIN_PORT),
        }
        container = self._run(
            self.images.proxy_image,
            "proxy",
            [PROXY_PORT, PROXY_ADMIN_PORT],
            environment,
            volumes={str(shared.resolve()): {"bind": BACKENDS_DIR, "mode": "ro"}},
        )
        admin = container.published(PROXY_ADMIN_PORT)
        public = f"http://{LOOPBACK}:{container.host_port}"
        proxy = Proxy(public, f"http://{LOOPBACK}:{admin}", backends_file, container)
        proxy.wait_for(len(backends), self.layout.ready_timeout)
        return proxy

    def close(self) -> None:
        """Every container's output saved, then the containers and the network removed."""
        for container, log_path in self.started:
            try:
                log_path.write_bytes(container.logs())
                container.remove(force=True)
            except docker.errors.NotFound:
                continue
        self.network.remove()
        self.docker.close()
