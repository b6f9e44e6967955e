"""Prometheus metrics of the proxy, kept in a registry of its own.

A dedicated CollectorRegistry (not the process-global one) lets tests and a
cluster launcher run several proxies in one process without name clashes.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .backends import BackendPool

__all__ = ["CONTENT_TYPE_LATEST", "LbMetrics"]


class LbMetrics:
    """All series the proxy exports; backend URLs are the ``backend`` label."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.backend_requests = Counter(
            "mrtr_lb_backend_requests", "Requests forwarded to a backend (attempts).", ["backend"], registry=r
        )
        self.backend_in_flight = Gauge(
            "mrtr_lb_backend_in_flight", "Requests currently open on a backend.", ["backend"], registry=r
        )
        self.backend_errors = Counter(
            "mrtr_lb_backend_errors",
            "Failed attempts; kind=connect (not delivered), upstream (maybe delivered) or unresponsive (abandoned).",
            ["backend", "kind"],
            registry=r,
        )
        self.backend_retries = Counter(
            "mrtr_lb_backend_retries",
            "Requests moved to another backend because this one could not be reached.",
            ["backend"],
            registry=r,
        )
        self.backend_healthy = Gauge(
            "mrtr_lb_backend_healthy", "1 if the last health check passed.", ["backend"], registry=r
        )
        self.backend_drained = Gauge(
            "mrtr_lb_backend_drained", "1 if an operator drained the backend.", ["backend"], registry=r
        )
        self.responses = Counter(
            "mrtr_lb_responses", "Responses sent to clients, by status code.", ["code"], registry=r
        )
        self.duration = Histogram(
            "mrtr_lb_request_duration_seconds",
            "Time from request start to the end of the proxied response.",
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self._per_backend: dict[str, Counter] = {}
        self._per_status: dict[int, Counter] = {}

    def requests_of(self, backend: str) -> Counter:
        """The requests counter of one backend, looked up once (``labels`` takes a lock)."""
        series = self._per_backend.get(backend)
        if series is None:
            series = self._per_backend[backend] = self.backend_requests.labels(backend)
        return series

    def count_response(self, status: int, seconds: float) -> None:
        counter = self._per_status.get(status)
        if counter is None:
            counter = self._per_status[status] = self.responses.labels(str(status))
        counter.inc()
        self.duration.observe(seconds)

    def render(self, pool: BackendPool) -> bytes:
        """Refresh state gauges from the pool (so vanished backends drop out) and serialize.

        In-flight counts are read from the pool here, not kept per request: two locked
        gauge updates per request saved.
        """
        self.backend_healthy.clear()
        self.backend_drained.clear()
        self.backend_in_flight.clear()
        for backend in pool:
            # Touching the labels makes every known backend show up, at 0 if idle.
            self.backend_requests.labels(backend.url)
            self.backend_retries.labels(backend.url)
            self.backend_in_flight.labels(backend.url).set(backend.in_flight)
            for kind in ("connect", "upstream", "unresponsive"):
                self.backend_errors.labels(backend.url, kind)
            self.backend_healthy.labels(backend.url).set(1 if backend.healthy else 0)
            self.backend_drained.labels(backend.url).set(1 if backend.drained else 0)
        return generate_latest(self.registry)
