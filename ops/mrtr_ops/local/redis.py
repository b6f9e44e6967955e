"""A Redis server process on 127.0.0.1: the fleet's task store when the cluster runs locally.

Debian's `redis-server` (`scripts/redis-setup` installs it), started with its
append-only file on (`appendfsync everysec`: a restart loses at most about a
second of writes) in a directory of its own, so a restart on the same
directory and port reloads every task. Readiness is a real `PING`.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from mrtr_ops.local.process import LOOPBACK, free_port
from mrtr_ops.waiting import wait_until

REDIS_URL_VARIABLE = "MRTR_WORKER_REDIS_URL"
"""The worker setting that names the task store; a worker without it serves everything but tasks."""


class RedisMissing(RuntimeError):
    """No `redis-server` on this machine; `scripts/redis-setup` installs Debian's."""


def ping(port: int, timeout: float = 1.0) -> bool:
    """True when a Redis server answers PING on 127.0.0.1:`port`."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class RedisServer:
    """One `redis-server` process with its data directory and log; stop, kill and restart keep both."""

    directory: Path
    port: int = field(default_factory=free_port)
    binary: str = "redis-server"
    options: list[str] = field(default_factory=list)
    """More command-line options (`--name value` pairs), read at every start: what `RedisHA` sets a node's
    replication with (a restart after a failover starts it as the new primary's replica)."""
    popen: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _log: IO[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.directory / "redis.log"

    @property
    def pid(self) -> int | None:
        return None if self.popen is None else self.popen.pid

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self, timeout: float = 30.0) -> RedisServer:
        """Start (or start again, on the same port and data) and wait until it answers PING."""
        path = shutil.which(self.binary)
        if path is None:
            raise RedisMissing(f"{self.binary} not found; install it with scripts/redis-setup")
        self.directory.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        argv = [
            path, "--port", str(self.port), "--bind", LOOPBACK, "--dir", str(self.directory),
            "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
            "--daemonize", "no", "--protected-mode", "yes", "--logfile", "",
            *self.options,
        ]  # fmt: skip
        self.popen = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def answers() -> bool:
            if not self.running:
                raise RuntimeError(
                    f"redis-server exited with {self.popen and self.popen.returncode}; see {self.log_path}"
                )
            return ping(self.port)

        wait_until(answers, timeout=timeout, interval=0.05, what=f"redis-server on port {self.port}")
        return self

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (Redis flushes its append-only file), then wait; SIGKILL if it does not exit."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._close_log()

    def kill(self) -> None:
        """SIGKILL, as a crash would: what the append-only file had not written in the last second is lost."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()
        self._close_log()

    def restart(self, timeout: float = 30.0) -> RedisServer:
        self.stop()
        return self.start(timeout)

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
