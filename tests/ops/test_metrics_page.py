"""Reading a Prometheus page: samples by name and labels, summed."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from mrtr_ops.metrics_page import MetricsPage

PAGE = """\
# HELP rejections_total Rejected states.
# TYPE rejections_total counter
rejections_total{reason="expired",route="a"} 2.0
rejections_total{reason="expired",route="b"} 3.0
rejections_total{reason="tampered",route="a"} 1.0
# HELP in_flight Requests in flight.
# TYPE in_flight gauge
in_flight 4.0
# HELP latency_seconds Latency.
# TYPE latency_seconds histogram
latency_seconds_bucket{le="0.1"} 1.0
latency_seconds_bucket{le="+Inf"} 3.0
latency_seconds_count 3.0
latency_seconds_sum 0.7
"""


@pytest.fixture
def page() -> MetricsPage:
    return MetricsPage.parse(PAGE)


def test_samples_are_keyed_by_name_and_sorted_labels(page: MetricsPage) -> None:
    assert page.samples[("rejections_total", (("reason", "expired"), ("route", "b")))] == 3.0
    assert page.samples[("in_flight", ())] == 4.0
    assert page.samples[("latency_seconds_bucket", (("le", "+Inf"),))] == 3.0


def test_value_sums_the_samples_whose_labels_include_the_given_ones(page: MetricsPage) -> None:
    assert page.value("rejections_total") == 6.0
    assert page.value("rejections_total", reason="expired") == 5.0
    assert page.value("rejections_total", reason="expired", route="a") == 2.0
    assert page.value("in_flight") == 4.0
    assert page.value("latency_seconds_sum") == pytest.approx(0.7)


def test_absent_samples_are_zero(page: MetricsPage) -> None:
    assert page.value("no_such_metric") == 0.0
    assert page.value("rejections_total", reason="oversized") == 0.0
    assert page.value("in_flight", route="a") == 0.0


def test_by_label_sums_per_value(page: MetricsPage) -> None:
    assert page.by_label("rejections_total", "reason") == {"expired": 5.0, "tampered": 1.0}
    assert page.by_label("rejections_total", "route", reason="expired") == {"a": 2.0, "b": 3.0}
    assert page.by_label("in_flight", "reason") == {}


def test_matching_yields_each_sample(page: MetricsPage) -> None:
    found = dict(page.matching("rejections_total", route="a"))
    assert found == {(("reason", "expired"), ("route", "a")): 2.0, (("reason", "tampered"), ("route", "a")): 1.0}


def test_a_page_from_prometheus_client_reads_back() -> None:
    registry = CollectorRegistry()
    requests = Counter("requests", "Requests.", ["method", "outcome"], registry=registry)
    requests.labels(method="tools/call", outcome="complete").inc(3)
    requests.labels(method="tools/call", outcome="input_required").inc(2)
    requests.labels(method="tools/list", outcome="complete").inc()
    Gauge("healthy", "Healthy.", ["backend"], registry=registry).labels(backend='http://w:8080/"x"').set(1)
    page = MetricsPage.parse(generate_latest(registry).decode())
    assert page.value("requests_total", method="tools/call") == 5.0
    assert page.by_label("requests_total", "outcome") == {"complete": 4.0, "input_required": 2.0}
    assert page.by_label("healthy", "backend") == {'http://w:8080/"x"': 1.0}


def test_an_empty_page_has_no_samples() -> None:
    assert MetricsPage.parse("").samples == {}
