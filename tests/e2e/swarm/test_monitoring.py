"""Prometheus in the swarm stack (compose.swarm-monitoring.yaml): it finds every worker task through
`tasks.worker`, scrapes the proxy's unpublished admin listener with the stack's secret token and Redis
through the exporter, and serves the fleet's console on its host-mode port."""

from __future__ import annotations

import httpx

from mrtr_ops.swarm.stack import SwarmStack
from mrtr_ops.waiting import wait_until
from tests.support.prometheus import TASK_STATUSES, active_targets, console_task_statuses, targets_per_job_once_all_up


def test_prometheus_runs_as_declared(stack: SwarmStack) -> None:
    spec = stack.spec("prometheus")
    assert spec["EndpointSpec"]["Mode"] == "dnsrr"
    assert [(p["PublishMode"], p["TargetPort"]) for p in spec["EndpointSpec"]["Ports"]] == [("host", 9090)]
    container = spec["TaskTemplate"]["ContainerSpec"]
    assert [s["SecretName"] for s in container["Secrets"]] == [f"{stack.name}_admin_token"]
    assert [c["File"]["Name"] for c in container["Configs"]] == ["/etc/mrtr/prometheus/prometheus.yml"]


def test_prometheus_scrapes_every_worker_task_the_proxy_and_redis(stack: SwarmStack, prometheus_url: str) -> None:
    replicas = stack.replicas("worker")
    jobs = wait_until(
        lambda: (
            (found := targets_per_job_once_all_up(prometheus_url)) and found.get("mrtr-worker") == replicas and found
        ),
        timeout=120,
        interval=1.0,
        what=f"{replicas} workers, the proxy and Redis up in Prometheus",
    )
    assert jobs == {"mrtr-worker": replicas, "mrtr-lb": 1, "redis": 1}
    scraped = {
        f"http://{t['labels']['instance']}"
        for t in active_targets(prometheus_url)
        if t["labels"]["job"] == "mrtr-worker"
    }
    assert scraped == {backend["url"].rstrip("/") for backend in stack.lb_backends()}, "the workers the proxy balances"


def test_the_console_renders_the_fleet(prometheus_url: str) -> None:
    found = wait_until(lambda: console_task_statuses(prometheus_url), timeout=120, interval=1.0, what="tasks by status")
    assert found == TASK_STATUSES


def test_the_proxys_public_port_serves_no_metrics(lb_url: str) -> None:
    for path in ("/lb/metrics", "/metrics"):
        assert httpx.get(f"{lb_url}{path}", timeout=10.0).status_code == 404
