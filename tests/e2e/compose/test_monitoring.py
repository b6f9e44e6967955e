"""The compose `monitoring` profile: Prometheus finds the fleet, scrapes it, and serves the fleet's console."""

from __future__ import annotations

import re
from typing import Any

import httpx

from mrtr_ops.waiting import wait_until


def _targets(prometheus_url: str) -> list[dict[str, Any]]:
    reply = httpx.get(f"{prometheus_url}/api/v1/targets", params={"state": "active"}, timeout=10.0)
    reply.raise_for_status()
    targets: list[dict[str, Any]] = reply.json()["data"]["activeTargets"]
    return targets


def _all_up(prometheus_url: str) -> dict[str, int] | None:
    """Targets per job once every one is up: the workers by DNS, the proxy's admin listener, the exporter."""
    targets = _targets(prometheus_url)
    if not targets or any(target["health"] != "up" for target in targets):
        return None
    jobs: dict[str, int] = {}
    for target in targets:
        jobs[target["labels"]["job"]] = jobs.get(target["labels"]["job"], 0) + 1
    return jobs


def test_prometheus_scrapes_every_worker_the_proxy_and_redis(prometheus_url: str) -> None:
    jobs = wait_until(lambda: _all_up(prometheus_url), timeout=120, interval=1.0, what="every target up")
    assert set(jobs) == {"mrtr-worker", "mrtr-lb", "redis"}
    assert jobs["mrtr-worker"] >= 1
    assert jobs["mrtr-lb"] == jobs["redis"] == 1


def test_the_console_renders_the_fleet(prometheus_url: str) -> None:
    wait_until(lambda: _all_up(prometheus_url), timeout=120, interval=1.0, what="every target up")

    def statuses() -> set[str] | None:
        page = httpx.get(f"{prometheus_url}/consoles/mrtr.html", timeout=10.0)
        page.raise_for_status()
        found = set(re.findall(r'<tr data-status="([a-z_]+)">', page.text))
        return found or None

    found = wait_until(statuses, timeout=60, interval=1.0, what="tasks by status on the console")
    assert found == {"working", "input_required", "completed", "failed", "cancelled"}


def test_the_proxys_public_port_serves_no_metrics(lb_url: str) -> None:
    for path in ("/lb/metrics", "/metrics"):
        assert httpx.get(f"{lb_url}{path}", timeout=10.0).status_code == 404
