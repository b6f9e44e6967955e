"""The local cluster as the rolling upgrade and the chaos run see a fleet (`mrtr_ops.fleet.Fleet`)."""

from __future__ import annotations

from pathlib import Path

from mrtr_ops.fleet import FleetWorker
from mrtr_ops.local.cluster import LocalCluster


class LocalFleet:
    """The local cluster's workers (processes on 127.0.0.1)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._cluster = cluster

    @property
    def keyring_file(self) -> Path:
        return self._cluster.keyring_file

    def workers(self) -> list[FleetWorker]:
        token = self._cluster.admin_token
        return [FleetWorker(h.instance_id, h.spec.version, h.url, token) for h in list(self._cluster.workers.values())]

    def start_worker(self, version: int, env: dict[str, str]) -> FleetWorker:
        handle = self._cluster.add_worker(version, extra_env=env)
        return FleetWorker(handle.instance_id, version, handle.url, self._cluster.admin_token)

    def drain_worker(self, instance_id: str) -> None:
        self._cluster.drain_worker(instance_id)
