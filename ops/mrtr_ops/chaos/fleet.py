"""A fleet that faults can be done to: the `Fleet` of the rolling upgrade plus the chaos run's actions.

Every action returns once it has been done (a killed worker is gone, a
restarted one is back in the proxy's rotation, a restarted Redis answers);
the chaos run times the rest itself. The local implementation acts on
processes and their cables, the compose one (`compose/chaos.py`) on
containers through the Docker SDK.
"""

from __future__ import annotations

import os
from typing import Protocol

from mrtr_ops.fleet import Fleet
from mrtr_ops.lb_admin import LbAdmin
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.local.fleet import LocalFleet
from mrtr_ops.local.redis import RedisServer


class ChaosFleet(Fleet, Protocol):
    lb: LbAdmin
    """The proxy's admin API (its admin listener, with the fleet's token)."""

    @property
    def lb_url(self) -> str:
        """The proxy's public base URL (where the load goes)."""
        ...

    def backend_url(self, instance_id: str) -> str:
        """The URL the proxy knows this worker by (its label in the proxy's metrics)."""
        ...

    def process_id(self, instance_id: str) -> int | None:
        """The worker's process id (on this host), None while it is not running."""
        ...

    def kill9(self, instance_id: str) -> None:
        """SIGKILL, no warning: returns once the process is gone."""
        ...

    def restart(self, instance_id: str) -> None:
        """Start a killed worker again under its identity; returns once it is in rotation."""
        ...

    def pause(self, instance_id: str) -> None: ...

    def resume(self, instance_id: str) -> None: ...

    def cut(self, instance_id: str) -> None:
        """Take the worker off the network: the proxy can no longer reach it; it keeps running."""
        ...

    def restore(self, instance_id: str) -> None:
        """Put it back on the network; returns once the proxy could reach it again (not waiting for rotation)."""
        ...

    def store_pid(self) -> int | None:
        """The task store's (Redis's) process id on this host, None while it is not running."""
        ...

    def restart_store(self) -> None:
        """Stop Redis (SIGTERM: its append-only file is written out) and start it on the same data;
        returns once it answers again."""
        ...


class LocalChaosFleet(LocalFleet):
    """The local cluster's workers: signals to processes, and the cables of a cluster started with `cables=True`."""

    def __init__(self, cluster: LocalCluster) -> None:
        super().__init__(cluster)
        self._local = cluster
        self.lb = cluster.lb

    @property
    def lb_url(self) -> str:
        return self._local.url

    def backend_url(self, instance_id: str) -> str:
        return self._local.workers[instance_id].lb_url

    def process_id(self, instance_id: str) -> int | None:
        process = self._local.workers[instance_id].process
        return process.pid if process.running else None

    def kill9(self, instance_id: str) -> None:
        self._local.kill_worker(instance_id)

    def restart(self, instance_id: str) -> None:
        self._local.restart_worker(instance_id)

    def pause(self, instance_id: str) -> None:
        self._local.pause_worker(instance_id)

    def resume(self, instance_id: str) -> None:
        self._local.resume_worker(instance_id)

    def cut(self, instance_id: str) -> None:
        self._local.cut_worker(instance_id)

    def restore(self, instance_id: str) -> None:
        self._local.restore_worker(instance_id)

    def store_pid(self) -> int | None:
        redis = self._store()
        return redis.pid if redis.running else None

    def restart_store(self) -> None:
        self._store().restart()

    def _store(self) -> RedisServer:
        if self._local.redis is None:
            raise RuntimeError("this cluster runs no task store (ClusterConfig.redis is off)")
        return self._local.redis


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host (a reaped child does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
