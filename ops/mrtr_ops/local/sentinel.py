"""One `redis-sentinel` process on 127.0.0.1, and how fast the sentinels act: a part of `RedisHA`.

Debian's `redis-sentinel` (`scripts/redis-setup` installs it) with a config
file of its own, written fresh at every start (Sentinel rewrites it as it
learns the set: the replicas, its peers, the current primary).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import redis

from mrtr_ops.local.process import LOOPBACK, free_port
from mrtr_ops.local.redis import RedisMissing, ping
from mrtr_ops.waiting import wait_until

SERVICE = "mrtr"
"""The name the sentinels monitor the primary by (the workers' `MRTR_WORKER_REDIS_SENTINEL_SERVICE`)."""


@dataclass(frozen=True)
class SentinelTiming:
    """How fast the sentinels act: the whole failover takes about `down_after_ms` plus one to two seconds."""

    down_after_ms: int = 2_000
    """Silence after which a sentinel holds the primary down (a majority agreeing starts the failover)."""
    failover_timeout_ms: int = 5_000
    """Bounds one failover attempt; a failed attempt is retried after twice this. A crash is seen by every
    sentinel at the same instant, so they may all vote for themselves; the election then fails and the
    retry decides (seen here: a 23 s failover with 10 s). Redis's default (180 s) suits no one here; 5 s
    keeps such a failover near ten seconds."""


@dataclass
class SentinelServer:
    """One `redis-sentinel` process with its own config file (Sentinel rewrites it as it learns the set)."""

    directory: Path
    port: int = field(default_factory=free_port)
    binary: str = "redis-sentinel"
    popen: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _log: IO[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "sentinel.log"

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self.popen is None else self.popen.pid

    def start(self, primary_port: int, quorum: int, timing: SentinelTiming, timeout: float = 30.0) -> SentinelServer:
        """Write a fresh config naming the primary, start, and wait until it answers PING."""
        path = shutil.which(self.binary)
        if path is None:
            raise RedisMissing(f"{self.binary} not found; install it with scripts/redis-setup")
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "sentinel.conf"
        config.write_text(
            "\n".join(
                [
                    f"port {self.port}",
                    f"bind {LOOPBACK}",
                    "daemonize no",
                    'logfile ""',
                    f"dir {self.directory}",
                    f"sentinel monitor {SERVICE} {LOOPBACK} {primary_port} {quorum}",
                    f"sentinel down-after-milliseconds {SERVICE} {timing.down_after_ms}",
                    f"sentinel failover-timeout {SERVICE} {timing.failover_timeout_ms}",
                    f"sentinel parallel-syncs {SERVICE} 1",
                    "",
                ]
            )
        )
        self._log = self.log_path.open("ab")
        self.popen = subprocess.Popen(
            [path, str(config)], stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )

        def answers() -> bool:
            if not self.running:
                raise RuntimeError(f"redis-sentinel exited; see {self.log_path}")
            return ping(self.port)

        wait_until(answers, timeout=timeout, interval=0.05, what=f"redis-sentinel on port {self.port}")
        return self

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._close_log()

    def kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()
        self._close_log()

    def ask(self, *command: str) -> Any:
        """One command to this sentinel (None when it does not answer)."""
        client = redis.Redis(host=LOOPBACK, port=self.port, socket_timeout=1.0, decode_responses=True)
        try:
            return client.execute_command(*command)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        except (redis.RedisError, OSError):
            return None
        finally:
            client.close()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
