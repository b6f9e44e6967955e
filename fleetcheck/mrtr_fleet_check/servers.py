"""Starting the server under test from a command line, the shared contract's way (issue #38).

`{port}` in the command is replaced by a free port on 127.0.0.1, which is also in the environment as
`PORT`, with `MCP_INSTANCE` (`v1-0`) and `MCP_VERSION`. Ready means a TCP connect succeeds; stopping
is SIGTERM with a grace period, then SIGKILL, as a rolling update stops a pod.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mrtr_fleet_check.instance import Instance, ServerFailed

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def accepts(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((LOOPBACK, port)) == 0


def split_command(template: str) -> list[str]:
    """The command's words; a clear error for an empty command or one without `{port}`."""
    try:
        argv = shlex.split(template)
    except ValueError as exc:
        raise ValueError(f"cannot split the server command {template!r}: {exc}") from None
    if not argv:
        raise ValueError("the server command is empty")
    if "{port}" not in template:
        raise ValueError(f"the server command {template!r} has no {{port}}: the check gives each instance its port")
    return argv


@dataclass(frozen=True)
class Commands:
    """The server under test as command lines, `{port}` in each."""

    v1: str
    v2: str


@dataclass
class Process:
    """A local process listening on `port` of 127.0.0.1, its output in the file `log`."""

    process: subprocess.Popen[bytes]
    port: int
    log: str

    def exited(self) -> int | None:
        return self.process.poll()

    def listening(self) -> bool:
        return accepts(self.port)

    def stop(self, grace: float) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_instance(template: str, version: int, number: int, log_dir: Path) -> Instance:
    port = free_port()
    name = f"v{version}-{number}"
    argv = [word.replace("{port}", str(port)) for word in split_command(template)]
    env = {**os.environ, "PORT": str(port), "MCP_INSTANCE": name, "MCP_VERSION": str(version)}
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with log_path.open("wb") as log:
        try:
            process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise ServerFailed(f"cannot start {name} with {argv[0]!r}: {exc.strerror}") from None
    url = f"http://{LOOPBACK}:{port}"
    return Instance(name, version, url, url, Process(process, port, str(log_path)))
