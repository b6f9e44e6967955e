"""Prometheus metrics of the proxy, kept in a registry of its own.

A dedicated CollectorRegistry (not the process-global one) lets tests and a
cluster launcher run several proxies in one process without name clashes.
The three series touched by every request (requests per backend, responses
per code, the duration histogram) are plain ints and floats, turned into
Prometheus families only when /lb/metrics is scraped: prometheus_client's
``inc``/``observe`` take a lock and a few calls each, about a tenth of the
lean engine's own CPU per request.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from mrtr_lb.backends import BackendPool

__all__ = ["CONTENT_TYPE_LATEST", "LbMetrics", "RequestCounts"]

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


REBALANCE_OUTCOMES = ("ok", "unauthorized", "refused", "unreachable")
"""ok: 2xx with a rebalance answer; unauthorized: 401/403 (token missing or wrong); refused: any other answer
(a 2xx that is not ``{"moved": N}`` too); unreachable: no answer."""


class RequestCounts(Collector):
    """The per-request series as plain numbers, rendered at scrape time."""

    def __init__(self) -> None:
        self.requests: dict[str, int] = {}
        """Attempts per backend URL (kept after a backend leaves the pool, as a counter must be)."""
        self.responses: dict[int, int] = {}
        self.buckets = [0] * (len(DURATION_BUCKETS) + 1)
        """Non-cumulative: index i counts durations in (bound[i-1], bound[i]]; the last one above every bound."""
        self.duration_sum = 0.0

    def count_request(self, backend: str) -> None:
        requests = self.requests
        requests[backend] = requests.get(backend, 0) + 1

    def count_response(self, status: int, seconds: float) -> None:
        responses = self.responses
        responses[status] = responses.get(status, 0) + 1
        self.buckets[bisect.bisect_left(DURATION_BUCKETS, seconds)] += 1
        self.duration_sum += seconds

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "mrtr_lb_backend_requests", "Requests forwarded to a backend (attempts).", labels=["backend"]
        )
        for url, count in self.requests.items():
            requests.add_metric([url], count)
        yield requests
        responses = CounterMetricFamily(
            "mrtr_lb_responses", "Responses sent to clients, by status code.", labels=["code"]
        )
        for status, count in sorted(self.responses.items()):
            responses.add_metric([str(status)], count)
        yield responses
        cumulative, total = [], 0
        for bound, count in zip((*DURATION_BUCKETS, float("inf")), self.buckets, strict=True):
            total += count
            cumulative.append(("+Inf" if bound == float("inf") else repr(bound), total))
        yield HistogramMetricFamily(
            "mrtr_lb_request_duration_seconds",
            "Time from request start to the end of the proxied response.",
            buckets=cumulative,
            sum_value=self.duration_sum,
        )


class LbMetrics:
    """All series the proxy exports; backend URLs are the ``backend`` label."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.counts = RequestCounts()
        r.register(self.counts)
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
        self.rebalance = Counter(
            "mrtr_lb_rebalance",
            "POST /admin/rebalance calls to backends after capacity joined, by outcome"
            " (ok, unauthorized, refused, unreachable).",
            ["outcome"],
            registry=r,
        )
        for outcome in REBALANCE_OUTCOMES:
            self.rebalance.labels(outcome)
        self.rebalance_moved = Counter(
            "mrtr_lb_rebalance_moved",
            "Queued calls the backends said a rebalance call moved on (their answer's `moved`).",
            registry=r,
        )
        self.count_request = self.counts.count_request
        self.count_response = self.counts.count_response

    def render(self, pool: BackendPool) -> bytes:
        """Refresh state gauges from the pool (so vanished backends drop out) and serialize.

        In-flight counts are read from the pool here, not kept per request: two locked
        gauge updates per request saved.
        """
        self.backend_healthy.clear()
        self.backend_drained.clear()
        self.backend_in_flight.clear()
        for backend in pool:
            # Every known backend shows up, at 0 if idle.
            self.counts.requests.setdefault(backend.url, 0)
            self.backend_retries.labels(backend.url)
            self.backend_in_flight.labels(backend.url).set(backend.in_flight)
            for kind in ("connect", "upstream", "unresponsive"):
                self.backend_errors.labels(backend.url, kind)
            self.backend_healthy.labels(backend.url).set(1 if backend.healthy else 0)
            self.backend_drained.labels(backend.url).set(1 if backend.drained else 0)
        return generate_latest(self.registry)
