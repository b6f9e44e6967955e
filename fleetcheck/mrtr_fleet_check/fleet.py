"""The instances under test and the proxy in front, and the rolling update from version 1 to version 2.

`Fleet` holds what both ways of running the server share: the order of the start, the rolling
update (start a version 2 instance, put it in the proxy's rotation, take a version 1 out, stop it
with the grace period) and the stop. `ProcessFleet` starts local processes from command lines,
`mrtr_fleet_check.containers.ContainerFleet` containers from images.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mrtr_fleet_check.instance import Instance
from mrtr_fleet_check.proxy import Proxy, start_proxy
from mrtr_fleet_check.servers import Commands, start_instance


@dataclass(frozen=True)
class Layout:
    """How many instances, where their logs go, and the timings every fleet keeps."""

    instances: int
    work_dir: Path
    mcp_path: str = "/mcp"
    grace: float = 15.0
    """Seconds a stopped instance has between SIGTERM and SIGKILL, as a pod's termination grace period."""
    ready_timeout: float = 60.0


class Fleet(ABC):
    """The running instances and the proxy; `roll` replaces every instance by version 2, one by one."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.instances: list[Instance] = []
        self.retired: list[Instance] = []
        self.proxy: Proxy | None = None

    @abstractmethod
    def start_instance(self, version: int, number: int) -> Instance: ...

    @abstractmethod
    def start_proxy(self, backends: Sequence[str]) -> Proxy:
        """The proxy, once every one of `backends` is in its rotation."""

    @abstractmethod
    def close(self) -> None:
        """Release what the fleet holds beyond its instances and proxy (a container fleet's network)."""

    def start(self) -> None:
        for n in range(self.layout.instances):
            self.instances.append(self.start_instance(1, n))
        for instance in self.instances:
            instance.wait_ready(self.layout.ready_timeout)
        self.proxy = self.start_proxy([i.backend_url for i in self.instances])

    def mcp(self, instance: Instance) -> str:
        return instance.url + self.layout.mcp_path

    def roll(self) -> None:
        """As a rolling update: start v2, put it in rotation, take a v1 out of rotation, SIGTERM it with grace."""
        assert self.proxy is not None
        for n, old in enumerate(list(self.instances)):
            new = self.start_instance(2, n)
            self.instances.append(new)
            new.wait_ready(self.layout.ready_timeout)
            self.proxy.set_backends([i.backend_url for i in self.instances])
            self.instances.remove(old)
            self.proxy.set_backends([i.backend_url for i in self.instances])
            self.retired.append(old)
            old.stop(self.layout.grace)

    def stop(self) -> None:
        try:
            if self.proxy is not None:
                self.proxy.stop()
            for instance in self.instances + self.retired:
                instance.stop(self.layout.grace)
        finally:
            self.close()


class ProcessFleet(Fleet):
    """Instances started from command lines (`{port}` in them), the proxy as `python -m mrtr_lb`."""

    def __init__(self, layout: Layout, commands: Commands) -> None:
        super().__init__(layout)
        self.commands = commands

    def start_instance(self, version: int, number: int) -> Instance:
        command = self.commands.v1 if version == 1 else self.commands.v2
        return start_instance(command, version, number, self.layout.work_dir)

    def start_proxy(self, backends: Sequence[str]) -> Proxy:
        return start_proxy(backends, self.layout.work_dir, self.layout.mcp_path, self.layout.ready_timeout)

    def close(self) -> None:
        """Processes hold nothing beyond themselves."""
