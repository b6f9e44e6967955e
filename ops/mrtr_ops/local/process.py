"""Start, watch and stop the fleet's processes on 127.0.0.1.

Used by `scripts/cluster`, the walkthrough and the test fixtures alike, so
every path starts the same worker and proxy the same way.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

from mrtr_ops.waiting import wait_until

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


class NotReady(RuntimeError):
    """A process died before it was ready, or a fleet change did not go as expected; the message says which."""


@dataclass
class ManagedProcess:
    """A child process with a name, a log file and a readiness URL."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    ready_url: str
    popen: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _log: IO[bytes] | None = field(default=None, init=False, repr=False)

    def start(self) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.popen = subprocess.Popen(
            self.argv, env=self.env, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def wait_ready(self, timeout: float = 180.0) -> None:
        """Poll the readiness URL until it answers 200; fail early (`NotReady`) if the process exits.

        Raises `TimeoutError` (naming the log) if it is still not ready after `timeout` seconds.
        """
        with httpx.Client(timeout=1.0) as http:

            def ready() -> bool:
                if not self.running:
                    raise NotReady(f"{self.name} exited with {self.returncode()}; see {self.log_path}")
                try:
                    return http.get(self.ready_url).status_code == 200
                except httpx.TransportError:
                    return False

            wait_until(ready, timeout=timeout, what=f"{self.name} to be ready (see {self.log_path})")

    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def signal(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.popen is not None
            self.popen.send_signal(sig)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (a worker drains first), then SIGKILL if it outlives `timeout`."""
        if self.popen is None:
            return None
        if self.running:
            self.popen.send_signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._close_log()
        return self.popen.returncode

    def kill(self) -> None:
        """SIGKILL at once: a crash, for failure tests."""
        if self.popen is not None and self.running:
            self.popen.kill()
            self.popen.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


@dataclass(frozen=True)
class WorkerSpec:
    """How to start one worker; the key ring file and audience are the fleet's."""

    instance_id: str
    port: int
    keyring_file: Path
    version: int = 1
    tool_packs: tuple[str, ...] = ("demo",)
    issuer_public_key: Path | None = None
    """Trust bearer tokens of this issuer and require one; None serves anonymous calls (development)."""
    admin_token: str | None = None
    extra_env: tuple[tuple[str, str], ...] = ()

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def process(self, log_dir: Path) -> ManagedProcess:
        env = {
            **os.environ,
            "MRTR_WORKER_INSTANCE_ID": self.instance_id,
            "MRTR_WORKER_PORT": str(self.port),
            "MRTR_WORKER_HOST": LOOPBACK,
            "MRTR_WORKER_VERSION": str(self.version),
            "MRTR_WORKER_KEYRING_FILE": str(self.keyring_file),
            "MRTR_WORKER_TOOL_PACKS": ",".join(self.tool_packs),
            "MRTR_WORKER_ALLOW_ANONYMOUS": "false" if self.issuer_public_key else "true",
            "PYTHONUNBUFFERED": "1",
        }
        for name in ("MRTR_WORKER_KEYRING", "MRTR_WORKER_JWT_PUBLIC_KEY_FILE", "MRTR_WORKER_ADMIN_TOKEN"):
            env.pop(name, None)
        if self.issuer_public_key is not None:
            env["MRTR_WORKER_JWT_PUBLIC_KEY_FILE"] = str(self.issuer_public_key)
        if self.admin_token is not None:
            env["MRTR_WORKER_ADMIN_TOKEN"] = self.admin_token
        env.update(self.extra_env)
        return ManagedProcess(
            name=self.instance_id,
            argv=[sys.executable, "-m", "mrtr_worker"],
            env=env,
            log_path=log_dir / f"{self.instance_id}.log",
            ready_url=f"{self.url}/readyz",
        )
