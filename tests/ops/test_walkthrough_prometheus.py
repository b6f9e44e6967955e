"""The walkthrough's two witnesses: where Locust's and Prometheus's calls by version disagree."""

from __future__ import annotations

from typing import Any

from mrtr_ops.walkthrough.prometheus_view import allowance_for_drains, disagreements
from mrtr_ops.walkthrough.report import prometheus_section


def test_counts_within_the_tolerance_agree() -> None:
    assert disagreements({"1": 100, "2": 250}, {"1": 95, "2": 240}) == []


def test_a_version_off_by_more_than_the_tolerance_is_named() -> None:
    assert disagreements({"1": 100, "2": 250}, {"1": 60, "2": 250}) == ["version 1: Locust 100, Prometheus 60"]


def test_a_version_only_one_witness_saw_is_named() -> None:
    assert disagreements({"1": 40}, {"1": 40, "2": 30}) == ["version 2: Locust 0, Prometheus 30"]


def test_the_report_sets_them_side_by_side() -> None:
    summary = {
        "completed_by_version": {"1": 100, "2": 250},
        "prometheus": {"calls_by_version": {"1": 60, "2": 250}, "states_refused": 3},
    }
    lines = prometheus_section(summary)
    assert "| 1 | 100 | 60 |" in lines
    assert "States refused (Prometheus): 3." in lines
    assert lines[-2] == "They disagree: version 1: Locust 100, Prometheus 60."


def test_without_prometheus_the_report_has_no_such_section() -> None:
    assert prometheus_section({"completed_by_version": {"1": 1}, "prometheus": None}) == []


def test_calls_a_drained_worker_ended_after_its_last_scrape_may_be_missing_but_never_extra() -> None:
    allowance = allowance_for_drains(calls=358, seconds=66.8, scrape_interval_s=2.0)  # about 10.7 calls
    assert disagreements({"1": 86, "2": 272}, {"1": 77, "2": 272}, {"1": allowance}) == []
    assert disagreements({"1": 86, "2": 272}, {"1": 60, "2": 272}, {"1": allowance}) == [
        "version 1: Locust 86, Prometheus 60"
    ]
    assert disagreements({"1": 86}, {"1": 110}, {"1": allowance}) == ["version 1: Locust 86, Prometheus 110"]


def test_the_report_allows_for_the_drained_version_only() -> None:
    def summary(newest: int) -> dict[str, Any]:
        scraped = {"calls_by_version": {"1": 77, "2": newest}, "states_refused": 0, "scrape_interval_s": 2.0}
        return {"completed_by_version": {"1": 86, "2": 272}, "duration_s": 66.8, "prometheus": scraped}

    assert prometheus_section(summary(240))[-2] == "They disagree: version 2: Locust 272, Prometheus 240."
    assert prometheus_section(summary(272))[-2] == "The two agree."  # version 1, drained, 9 short: allowed
