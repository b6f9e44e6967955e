"""`scripts/cluster --prometheus`: Debian's Prometheus watches the local cluster, with the fleet's rules.

Everything real: the cluster's processes, Prometheus and the Redis exporter (scripts/prometheus-setup),
read through Prometheus's own HTTP API.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr_client import Client
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.local.prometheus import LocalPrometheus
from mrtr_ops.waiting import wait_until

pytestmark = pytest.mark.slow  # starts a cluster, Redis, Prometheus and the exporter


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    for binary in ("prometheus", "promtool", "prometheus-redis-exporter", "redis-server"):
        if shutil.which(binary) is None:
            pytest.fail(f"{binary} is needed: scripts/prometheus-setup and scripts/redis-setup install them")
    config = ClusterConfig(workers=2, port=0, work_dir=tmp_path_factory.mktemp("watched"), prometheus=True)
    cluster = LocalCluster(config).start()
    yield cluster
    cluster.stop()


def _prometheus(cluster: LocalCluster) -> LocalPrometheus:
    assert cluster.prometheus is not None
    return cluster.prometheus


def _api(cluster: LocalCluster, path: str, **params: str) -> Any:
    reply = httpx.get(f"{_prometheus(cluster).url}/api/v1/{path}", params=params, timeout=5.0)
    reply.raise_for_status()
    return reply.json()["data"]


def _targets_up(cluster: LocalCluster) -> dict[str, int]:
    """Targets reported up, per job, once every target has been scraped and none is down."""
    active = _api(cluster, "targets", state="active")["activeTargets"]
    if any(target["health"] != "up" for target in active):
        return {}
    jobs: dict[str, int] = {}
    for target in active:
        jobs[target["labels"]["job"]] = jobs.get(target["labels"]["job"], 0) + 1
    return jobs


def _query(cluster: LocalCluster, expr: str) -> dict[str, float]:
    """An instant query's samples, keyed by their labels written out."""
    result = _api(cluster, "query", query=expr)["result"]
    return {",".join(f"{k}={v}" for k, v in sorted(s["metric"].items())): float(s["value"][1]) for s in result}


def test_every_target_is_up(watched: LocalCluster) -> None:
    expected = {"mrtr-worker": 2, "mrtr-lb": 1, "redis": 1}
    wait_until(lambda: _targets_up(watched) == expected, timeout=60, what="every target up")


def test_the_generated_configuration_passes_promtool(watched: LocalCluster) -> None:
    config = _prometheus(watched).config_file
    done = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 2 rule files found" in done.stdout


def test_a_recording_rule_counts_the_ready_backends(watched: LocalCluster) -> None:
    ready = wait_until(
        lambda: _query(watched, "mrtr:lb_ready_backends:sum"), timeout=60, what="the ready-backends rule"
    )
    assert list(ready.values()) == [2.0]


def test_the_version_joins_the_worker_series(watched: LocalCluster) -> None:
    versions = wait_until(
        lambda: _query(watched, "count by (version) (mrtr_worker_info)"), timeout=60, what="mrtr_worker_info"
    )
    assert versions == {"version=1": 2.0}


def test_a_worker_that_joins_is_scraped(watched: LocalCluster) -> None:
    watched.add_worker(version=2)
    expected = {"mrtr-worker": 3, "mrtr-lb": 1, "redis": 1}
    wait_until(lambda: _targets_up(watched) == expected, timeout=60, what="the new worker's target up")
    both = {"version=1": 2.0, "version=2": 1.0}
    wait_until(
        lambda: _query(watched, "count by (version) (mrtr_worker_info)") == both, timeout=60, what="both versions"
    )


def test_the_proxy_token_is_not_in_the_configuration(watched: LocalCluster) -> None:
    prometheus = _prometheus(watched)
    assert watched.admin_token not in prometheus.config_file.read_text()
    token_file = Path(prometheus.directory / "admin-token")
    assert token_file.stat().st_mode & 0o077 == 0


def _rule_health(cluster: LocalCluster) -> dict[str, str]:
    """Each rule's health once every rule has been evaluated at least once (else empty)."""
    rules = [rule for group in _api(cluster, "rules")["groups"] for rule in group["rules"]]
    if any(rule["health"] == "unknown" for rule in rules):
        return {}
    return {rule["name"]: rule["health"] for rule in rules}


def test_every_rule_evaluates_on_the_real_series(watched: LocalCluster) -> None:
    health = wait_until(lambda: _rule_health(watched), timeout=60, what="every rule evaluated")
    assert len(health) == 19
    assert {name for name, state in health.items() if state != "ok"} == set()


def _console(cluster: LocalCluster) -> str:
    reply = httpx.get(_prometheus(cluster).console_url, timeout=10.0)
    reply.raise_for_status()
    return reply.text


def _shares(page: str) -> dict[str, float]:
    """The console's traffic share per version, as Prometheus rendered it."""
    rows = re.findall(r'<tr data-version="(\d+)">.*?<td class="share">([0-9.]+)</td>', page, re.S)
    return {version: float(share) for version, share in rows}


def test_the_console_renders_the_fleet(watched: LocalCluster) -> None:
    # Runs after a version 2 worker joined: rounds reach both versions through the proxy.
    with Client(watched.mcp_url) as client:

        def both_versions_served() -> dict[str, float] | None:
            for _ in range(6):
                client.call_tool("echo", {"text": "watched"})
            shares = _shares(_console(watched))
            return shares if set(shares) == {"1", "2"} else None

        shares = wait_until(both_versions_served, timeout=90, interval=1.0, what="the console's version shares")
    assert sum(shares.values()) == pytest.approx(1.0, abs=0.01)
    assert shares["1"] > shares["2"] > 0  # two version 1 workers, one version 2, round robin
    page = _console(watched)
    instances = re.findall(r'<tr data-instance="([^"]+)">', page)
    assert sorted(instances) == sorted(handle.url.removeprefix("http://") for handle in watched.workers.values())
    assert set(re.findall(r'<tr data-status="([a-z_]+)">', page)) == {
        "working", "input_required", "completed", "failed", "cancelled"
    }  # fmt: skip
