"""One instance of the server under test, wherever it runs: a local process or a container.

The check reaches an instance at `url` (its probes), the proxy at `backend_url` (the same address
for a process; the container's name on its network for a container). What differs between the two
is behind `Running`: whether it still runs, whether it listens, and how it stops.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol


class ServerFailed(RuntimeError):
    """An instance could not be started or did not become ready; the message names its log."""


class Running(Protocol):
    """A started server or proxy, process or container."""

    log: str
    """Where its output is, for a message: a file, or the command that shows a container's."""

    def exited(self) -> int | None:
        """Its exit status once it has exited, else None."""
        ...

    def listening(self) -> bool: ...

    def stop(self, grace: float) -> None:
        """SIGTERM, and SIGKILL if it outlives `grace` seconds."""
        ...


@dataclass
class Instance:
    name: str
    version: int
    url: str
    """Where the check reaches it (`http://127.0.0.1:PORT`)."""
    backend_url: str
    """Where the proxy reaches it."""
    running: Running

    def wait_ready(self, timeout: float) -> None:
        """Until it listens; `ServerFailed` at once if it exits first."""
        deadline = time.monotonic() + timeout
        while not self.running.listening():
            if (status := self.running.exited()) is not None:
                raise ServerFailed(f"{self.name} exited with {status} before it listened; see {self.running.log}")
            if time.monotonic() >= deadline:
                raise ServerFailed(
                    f"{self.name} did not listen at {self.url} within {timeout:g} s; see {self.running.log}"
                )
            time.sleep(0.05)

    def stop(self, grace: float) -> None:
        self.running.stop(grace)
