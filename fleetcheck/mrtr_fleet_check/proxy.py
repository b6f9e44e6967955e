"""The project's proxy (`mrtr_lb`) in front of the instances, its backends in a file.

The backends file is the proxy's documented way to change its backends at runtime (docs/proxy.md,
`MRTR_LB_BACKENDS_FILE`, re-read every second): the check writes it whole (a rename, so the proxy
never reads half a list) and waits until the proxy's `/lb/healthz` counts the new set, in rotation.
The health check is `tcp`, which fits any server. The proxy runs as a local process here, or as
its image in a container (`mrtr_fleet_check.containers`); the settings are the same.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from mrtr_fleet_check.instance import Running, ServerFailed
from mrtr_fleet_check.servers import LOOPBACK, Process, free_port

STOP_GRACE = 15.0
"""Seconds the proxy has to close its connections when the check ends."""


@dataclass
class Proxy:
    url: str
    """Where the load reaches it (`http://127.0.0.1:PORT`)."""
    admin_url: str
    backends_file: Path
    running: Running

    def set_backends(self, urls: Sequence[str], timeout: float = 30.0) -> None:
        """Write the new set, and return once the proxy has them all and every one is in rotation."""
        write_backends(self.backends_file, urls)
        self.wait_for(len(urls), timeout)

    def wait_for(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        seen: dict[str, object] = {}
        with httpx.Client(timeout=2.0) as http:
            while True:
                if (status := self.running.exited()) is not None:
                    raise ServerFailed(f"the proxy exited with {status}; see {self.running.log}")
                try:
                    seen = http.get(f"{self.admin_url}/lb/healthz").json()
                except (httpx.TransportError, ValueError):
                    seen = {}
                if seen.get("backends") == count and seen.get("eligible") == count:
                    return
                if time.monotonic() >= deadline:
                    raise ServerFailed(
                        f"the proxy did not have {count} backends in rotation within {timeout:g} s (last: {seen}); "
                        f"see {self.running.log}"
                    )
                time.sleep(0.05)

    def stop(self) -> None:
        self.running.stop(STOP_GRACE)


def write_backends(path: Path, urls: Sequence[str]) -> None:
    staged = path.with_suffix(".new")
    staged.write_text("".join(f"{url}\n" for url in urls), encoding="utf-8")
    os.replace(staged, path)


def proxy_settings(backends_file: str, mcp_path: str) -> dict[str, str]:
    """The proxy's environment, wherever it runs: its backends from the file, a TCP health check, MCP's path."""
    return {
        "MRTR_LB_BACKENDS_FILE": backends_file,
        "MRTR_LB_HEALTH_CHECK": "tcp",
        "MRTR_LB_PROXY_PATHS": mcp_path,
    }


def start_proxy(backends: Sequence[str], work_dir: Path, mcp_path: str, timeout: float = 60.0) -> Proxy:
    port, admin_port = free_port(), free_port()
    backends_file = work_dir / "backends.txt"
    write_backends(backends_file, backends)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MRTR_LB_")}
    env = {
        **clean,
        **proxy_settings(str(backends_file), mcp_path),
        "MRTR_LB_PORT": str(port),
        "MRTR_LB_HOST": LOOPBACK,
        "MRTR_LB_ADMIN_PORT": str(admin_port),
    }
    log_path = work_dir / "proxy.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "mrtr_lb"], env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    proxy = Proxy(
        f"http://{LOOPBACK}:{port}",
        f"http://{LOOPBACK}:{admin_port}",
        backends_file,
        Process(process, port, str(log_path)),
    )
    proxy.wait_for(len(backends), timeout)
    return proxy
