"""The compose `monitoring` profile: Prometheus finds the fleet, scrapes it, and serves the fleet's console."""

from __future__ import annotations

import httpx

from mrtr_ops.waiting import wait_until
from tests.support.prometheus import TASK_STATUSES, console_task_statuses, targets_per_job_once_all_up


def test_prometheus_scrapes_every_worker_the_proxy_and_redis(prometheus_url: str) -> None:
    jobs = wait_until(lambda: targets_per_job_once_all_up(prometheus_url), timeout=120, interval=1.0, what="all up")
    assert set(jobs) == {"mrtr-worker", "mrtr-lb", "redis"}
    assert jobs["mrtr-worker"] >= 1
    assert jobs["mrtr-lb"] == jobs["redis"] == 1


def test_the_console_renders_the_fleet(prometheus_url: str) -> None:
    wait_until(lambda: targets_per_job_once_all_up(prometheus_url), timeout=120, interval=1.0, what="every target up")
    found = wait_until(lambda: console_task_statuses(prometheus_url), timeout=60, interval=1.0, what="tasks by status")
    assert found == TASK_STATUSES


def test_the_proxys_public_port_serves_no_metrics(lb_url: str) -> None:
    for path in ("/lb/metrics", "/metrics"):
        assert httpx.get(f"{lb_url}{path}", timeout=10.0).status_code == 404
