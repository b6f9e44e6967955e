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
import time
from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"


class ServerFailed(RuntimeError):
    """An instance could not be started or did not become ready; the message names its log."""


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


@dataclass
class Instance:
    name: str
    version: int
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def wait_ready(self, timeout: float) -> None:
        """Until a TCP connect succeeds; `ServerFailed` at once if the process exits first."""
        deadline = time.monotonic() + timeout
        while not accepts(self.port):
            if self.process.poll() is not None:
                raise ServerFailed(
                    f"{self.name} exited with {self.process.returncode} before it listened; see {self.log_path}"
                )
            if time.monotonic() >= deadline:
                raise ServerFailed(
                    f"{self.name} did not listen on port {self.port} within {timeout:g} s; see {self.log_path}"
                )
            time.sleep(0.05)

    def stop(self, grace: float) -> int:
        """SIGTERM, and SIGKILL if it outlives `grace` seconds; the exit status."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


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
    return Instance(name, version, port, process, log_path)
