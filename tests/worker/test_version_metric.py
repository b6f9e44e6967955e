"""A worker names its behaviour version on /metrics: Prometheus joins it to every other series.

Traffic by version (deploy/prometheus/rules) needs it: in a rolling upgrade both versions run as one
service, so discovery cannot tell them apart.
"""

from __future__ import annotations

import httpx

from mrtr_ops.metrics_page import MetricsPage
from tests.conftest import StartWorker


def test_a_worker_exports_its_version(start_worker: StartWorker) -> None:
    spec, _ = start_worker(version=2)
    page = MetricsPage.parse(httpx.get(f"{spec.url}/metrics").text)
    assert page.by_label("mrtr_worker_info", "version") == {"2": 1.0}
