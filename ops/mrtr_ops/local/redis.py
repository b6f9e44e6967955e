"""A Redis server process on 127.0.0.1: the fleet's task store when the cluster runs locally.

Debian's `redis-server` (`scripts/redis-setup` installs it), started with its
append-only file on (`appendfsync everysec`: a restart loses at most about a
second of writes) in a directory of its own, so a restart on the same
directory and port reloads every task. Readiness is a real `PING`.
"""

from __future__ import annotations

import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path

from mrtr_ops.local.process import LOOPBACK, ChildProcess, free_port

REDIS_URL_VARIABLE = "MRTR_WORKER_REDIS_URL"
"""The worker setting that names the task store; a worker without it serves everything but tasks."""


class RedisMissing(RuntimeError):
    """No `redis-server` on this machine; `scripts/redis-setup` installs Debian's."""


def installed(binary: str) -> str:
    """Where `binary` (`redis-server`, `redis-sentinel`) is on the PATH; `RedisMissing` if nowhere."""
    path = shutil.which(binary)
    if path is None:
        raise RedisMissing(f"{binary} not found; install it with scripts/redis-setup")
    return path


def ping(port: int, timeout: float = 1.0) -> bool:
    """True when a Redis server answers PING on 127.0.0.1:`port`."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class RedisServer(ChildProcess):
    """One `redis-server` process with its data directory and log; stop, kill and restart keep both."""

    directory: Path
    port: int = field(default_factory=free_port)
    binary: str = "redis-server"
    options: list[str] = field(default_factory=list)
    """More command-line options (`--name value` pairs), read at every start: what `RedisHA` sets a node's
    replication with (a restart after a failover starts it as the new primary's replica)."""

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.directory / "redis.log"

    def start(self, timeout: float = 30.0) -> RedisServer:
        """Start (or start again, on the same port and data) and wait until it answers PING."""
        argv = [
            installed(self.binary), "--port", str(self.port), "--bind", LOOPBACK, "--dir", str(self.directory),
            "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
            "--daemonize", "no", "--protected-mode", "yes", "--logfile", "",
            *self.options,
        ]  # fmt: skip
        self._spawn(argv, self.log_path)
        self._wait_ready(
            lambda: ping(self.port), name=f"{self.binary} on port {self.port}", log_path=self.log_path, timeout=timeout
        )
        return self

    def restart(self, timeout: float = 30.0) -> RedisServer:
        self.stop()
        return self.start(timeout)
