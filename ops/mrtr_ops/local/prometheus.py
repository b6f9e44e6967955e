"""Prometheus watching the local cluster: Debian's `prometheus` and `prometheus-redis-exporter` as processes.

`scripts/cluster --prometheus`. The same rules as every other platform (`deploy/prometheus/rules`);
the workers are found through a file the cluster rewrites at every membership change (file_sd, the
local counterpart of the proxy's backends file), the proxy is scraped on its admin listener with the
operator's token from a file, Redis through one exporter per node.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from mrtr_ops.local.process import LOOPBACK, ManagedProcess, free_port
from mrtr_ops.paths import project_root

SLICES_STREAM = "mrtr:slices"
"""The workers' task queue under the default MRTR_WORKER_REDIS_PREFIX: the exporter reports its consumers."""

CONSOLE_LIBRARIES = Path("/usr/share/doc/prometheus/examples/console_libraries")
"""The console libraries Debian's prometheus ships (menu.lib, prom.lib): the fleet's console uses them."""

CONSOLE_PAGE = "mrtr.html"
"""The fleet's console in deploy/prometheus/consoles: served at /consoles/mrtr.html."""

SCRAPE_SECONDS = 2
"""Short, so a test or a person at the console sees a change within seconds."""


class PrometheusMissing(RuntimeError):
    """No `prometheus` (or exporter) on this machine; `scripts/prometheus-setup` installs Debian's."""


def installed(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        raise PrometheusMissing(f"{binary} not found; install it with scripts/prometheus-setup")
    return path


@dataclass
class LocalPrometheus:
    """Prometheus, its configuration and targets in `directory`, and a Redis exporter per node."""

    directory: Path
    proxy_admin: str
    """The proxy's admin listener, host:port."""
    admin_token: str
    redis_ports: tuple[int, ...] = ()
    port: int = field(default_factory=free_port)
    _processes: list[ManagedProcess] = field(default_factory=list, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def console_url(self) -> str:
        """The fleet's console: traffic by version, hand-backs, in flight per instance, tasks by status."""
        return f"{self.url}/consoles/{CONSOLE_PAGE}"

    @property
    def config_file(self) -> Path:
        return self.directory / "prometheus.yml"

    @property
    def workers_file(self) -> Path:
        return self.directory / "workers.json"

    def watch_workers(self, workers: Mapping[str, str]) -> None:
        """Scrape these workers (instance id -> own URL) from now on; the file is replaced whole, never half-read."""
        groups = [
            {"targets": [url.removeprefix("http://")], "labels": {"instance_id": instance_id}}
            for instance_id, url in workers.items()
        ]
        self.directory.mkdir(parents=True, exist_ok=True)
        fresh = self.workers_file.with_name(self.workers_file.name + ".new")
        fresh.write_text(json.dumps(groups, indent=1))
        os.replace(fresh, self.workers_file)

    def start(self, timeout: float = 60.0) -> LocalPrometheus:
        """Start the exporters, then Prometheus; returns once Prometheus says it is ready."""
        binary = installed("prometheus")
        if not (CONSOLE_LIBRARIES / "prom.lib").is_file():
            raise PrometheusMissing(
                f"no console libraries in {CONSOLE_LIBRARIES}; scripts/prometheus-setup installs them"
            )
        exporter = installed("prometheus-redis-exporter") if self.redis_ports else ""
        exporters = [self._exporter(exporter, redis_port) for redis_port in self.redis_ports]
        self._write_config([f"{LOOPBACK}:{port}" for port, _ in exporters])
        for _, process in exporters:
            self._processes.append(process.start())
            process.wait_ready(timeout)
        server = ManagedProcess(
            name="prometheus",
            argv=[
                binary,
                f"--config.file={self.config_file}",
                f"--storage.tsdb.path={self.directory / 'data'}",
                f"--web.listen-address={LOOPBACK}:{self.port}",
                f"--web.console.templates={project_root() / 'deploy' / 'prometheus' / 'consoles'}",
                f"--web.console.libraries={CONSOLE_LIBRARIES}",
            ],
            env=dict(os.environ),
            log_path=self.directory / "prometheus.log",
            ready_url=f"{self.url}/-/ready",
        )
        self._processes.append(server.start())
        server.wait_ready(timeout)
        return self

    def stop(self) -> None:
        for process in reversed(self._processes):
            process.stop()
        self._processes.clear()

    def _exporter(self, binary: str, redis_port: int) -> tuple[int, ManagedProcess]:
        port = free_port()
        process = ManagedProcess(
            name=f"redis-exporter-{redis_port}",
            argv=[
                binary,
                f"-redis.addr=redis://{LOOPBACK}:{redis_port}",
                f"-web.listen-address={LOOPBACK}:{port}",
                f"-check-streams={SLICES_STREAM}",
                f"-script={project_root() / 'deploy' / 'prometheus' / 'task-status.lua'}",
            ],
            env=dict(os.environ),
            log_path=self.directory / f"redis-exporter-{redis_port}.log",
            ready_url=f"http://{LOOPBACK}:{port}/metrics",
        )
        return port, process

    def _write_config(self, exporters: list[str]) -> None:
        token_file = self.directory / "admin-token"
        self.directory.mkdir(parents=True, exist_ok=True)
        token_file.write_text(self.admin_token + "\n")
        token_file.chmod(0o600)
        if not self.workers_file.exists():
            self.watch_workers({})
        scrape = [
            {
                "job_name": "mrtr-worker",
                "file_sd_configs": [{"files": [str(self.workers_file)], "refresh_interval": "1s"}],
            },
            {
                "job_name": "mrtr-lb",
                "metrics_path": "/lb/metrics",
                "authorization": {"credentials_file": str(token_file)},
                "static_configs": [{"targets": [self.proxy_admin]}],
            },
        ]
        if exporters:
            scrape.append({"job_name": "redis", "static_configs": [{"targets": exporters}]})
        interval = f"{SCRAPE_SECONDS}s"
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "rule_files": [str(project_root() / "deploy" / "prometheus" / "rules" / "*.yml")],
            "scrape_configs": scrape,
        }
        self.config_file.write_text(yaml.safe_dump(config, sort_keys=False))
