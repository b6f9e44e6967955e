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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

from mrtr_ops.waiting import wait_until

LOOPBACK = "127.0.0.1"


_handed_out: set[int] = set()
_REMEMBERED_AT_MOST = 10_000


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now, and not one this process handed out before.

    A port is only taken when its process binds it, later: the kernel may offer a port again once the probe
    socket closes, and a cluster that picked its proxy's admin port before its workers' ports saw a worker
    take it first (the proxy then failed to start). So a port goes out once per process.
    """
    if len(_handed_out) > _REMEMBERED_AT_MOST:
        _handed_out.clear()  # a long run: forget the oldest batch rather than run out of the ephemeral range
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((LOOPBACK, 0))
            port: int = sock.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


class NotReady(RuntimeError):
    """A process died before it was ready, or a fleet change did not go as expected; the message says which."""


@dataclass
class ChildProcess:
    """One child process and its log file: the lifecycle every process of the local cluster shares.

    A subclass says what to run (`_spawn`) and when it is ready (`_wait_ready`); stopping is the same
    for the workers, the proxy, Redis and Sentinel: SIGCONT (a paused process cannot act on SIGTERM),
    SIGTERM, and SIGKILL only if it outlives the timeout.
    """

    popen: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _log: IO[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def pid(self) -> int | None:
        return None if self.popen is None else self.popen.pid

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def signal(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.popen is not None
            self.popen.send_signal(sig)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (a worker drains first, Redis flushes its append-only file), then SIGKILL if it outlives
        `timeout`. Returns the exit status (None if it never started)."""
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

    def _spawn(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        """Start `argv` (with `env`, else this process's environment), its output appended to `log_path`."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._close_log()
        self._log = log_path.open("ab")
        self.popen = subprocess.Popen(
            argv, env=env, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )

    def _wait_ready(
        self, ready: Callable[[], bool], *, name: str, log_path: Path, timeout: float, interval: float = 0.05
    ) -> None:
        """Poll `ready` until it is true; fail early (`NotReady`) if the process exits.

        Raises `TimeoutError` (naming the log) if it is still not ready after `timeout` seconds.
        """

        def answers() -> bool:
            if not self.running:
                raise NotReady(f"{name} exited with {self.returncode()}; see {log_path}")
            return ready()

        wait_until(answers, timeout=timeout, interval=interval, what=f"{name} to be ready (see {log_path})")

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


@dataclass
class ManagedProcess(ChildProcess):
    """A child process with a name, a log file and a readiness URL."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    ready_url: str

    def start(self) -> ManagedProcess:
        self._spawn(self.argv, self.log_path, self.env)
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def wait_ready(self, timeout: float = 180.0) -> None:
        """Poll the readiness URL until it answers 200; fail early (`NotReady`) if the process exits.

        Raises `TimeoutError` (naming the log) if it is still not ready after `timeout` seconds.
        """
        with httpx.Client(timeout=1.0) as http:

            def answers() -> bool:
                try:
                    return http.get(self.ready_url).status_code == 200
                except httpx.TransportError:
                    return False

            self._wait_ready(answers, name=self.name, log_path=self.log_path, timeout=timeout)


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
