"""A fleet of workers as the rolling upgrade sees it, wherever the workers run.

`Fleet` is the small surface an upgrade needs: list the workers, start one of a
given version (returning once it is ready and in the balancer's rotation),
drain one (returning once it is gone), and the key ring file they all read.
The operator calls every worker makes (reload the ring, switch the state
format, read a metric) are plain HTTP to the worker's admin URL, the same
for local processes and containers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from mrtr_ops.metrics_page import MetricsPage


@dataclass(frozen=True)
class FleetWorker:
    instance_id: str
    version: int
    admin_url: str
    """The worker's own base URL (not through the balancer): /admin, /metrics, /readyz."""
    admin_token: str | None = None
    """The operator's token for /admin (None where the fleet leaves it open)."""


class Fleet(Protocol):
    @property
    def keyring_file(self) -> Path: ...

    def workers(self) -> list[FleetWorker]: ...

    def start_worker(self, version: int, env: dict[str, str]) -> FleetWorker: ...

    def drain_worker(self, instance_id: str) -> None: ...


class AdminError(RuntimeError):
    """A worker refused an operator call; the message carries its answer."""


def admin_call(worker: FleetWorker, method: str, path: str, *, timeout: float = 10.0, **params: Any) -> dict[str, Any]:
    headers = {} if worker.admin_token is None else {"Authorization": f"Bearer {worker.admin_token}"}
    response = httpx.request(
        method, f"{worker.admin_url}{path}", params=params or None, headers=headers, timeout=timeout
    )
    if response.status_code != 200:
        raise AdminError(f"{worker.instance_id}: {method} {path} answered {response.status_code}: {response.text}")
    body: dict[str, Any] = response.json()
    return body


def metrics(worker: FleetWorker, timeout: float = 10.0) -> MetricsPage:
    """One scrape of a worker's own `/metrics` (raises `httpx.HTTPError` if it does not answer)."""
    return MetricsPage.parse(httpx.get(f"{worker.admin_url}/metrics", timeout=timeout).text)


def metric(worker: FleetWorker, name: str, **labels: str) -> float:
    """A worker's samples called `name` with these labels, summed (0 if absent)."""
    return metrics(worker).value(name, **labels)
