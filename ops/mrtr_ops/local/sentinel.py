"""One `redis-sentinel` process on 127.0.0.1, and how fast the sentinels act: a part of `RedisHA`.

Debian's `redis-sentinel` (`scripts/redis-setup` installs it) with a config
file of its own, written fresh at every start (Sentinel rewrites it as it
learns the set: the replicas, its peers, the current primary).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from mrtr_ops.local.process import LOOPBACK, ChildProcess, free_port
from mrtr_ops.local.redis import installed, ping

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
class SentinelServer(ChildProcess):
    """One `redis-sentinel` process with its own config file (Sentinel rewrites it as it learns the set)."""

    directory: Path
    port: int = field(default_factory=free_port)
    binary: str = "redis-sentinel"

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "sentinel.log"

    def start(self, primary_port: int, quorum: int, timing: SentinelTiming, timeout: float = 30.0) -> SentinelServer:
        """Write a fresh config naming the primary, start, and wait until it answers PING."""
        path = installed(self.binary)
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
        self._spawn([path, str(config)], self.log_path)
        self._wait_ready(
            lambda: ping(self.port), name=f"{self.binary} on port {self.port}", log_path=self.log_path, timeout=timeout
        )
        return self

    def ask(self, *command: str) -> Any:
        """One command to this sentinel (None when it does not answer)."""
        client = redis.Redis(host=LOOPBACK, port=self.port, socket_timeout=1.0, decode_responses=True)
        try:
            return client.execute_command(*command)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        except (redis.RedisError, OSError):
            return None
        finally:
            client.close()
