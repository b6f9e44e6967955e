"""The fleet's Prometheus rules, checked and unit-tested by Debian's promtool (scripts/prometheus-setup).

Beyond promtool: every alert has a test that fires it and one that keeps it quiet, a runbook section in
docs/monitoring.md, and the rules read only series the worker and the proxy really export.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from mrtr_lb.metrics import LbMetrics
from mrtr_worker.metrics import WorkerMetrics

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
RULES = sorted((PROMETHEUS / "rules").glob("*.yml"))
TESTS = sorted((PROMETHEUS / "tests").glob("*.test.yml"))
RUNBOOK = ROOT / "docs" / "monitoring.md"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is needed: scripts/prometheus-setup installs Debian's prometheus")
    return found


def run(promtool: str, *args: str) -> str:
    done = subprocess.run([promtool, *args], cwd=PROMETHEUS, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_rules_are_valid(promtool: str) -> None:
    out = run(promtool, "check", "rules", *map(str, RULES))
    assert out.count("SUCCESS") == len(RULES)


@pytest.mark.parametrize("config", ["prometheus.yml", "prometheus-swarm.yml"])
def test_the_compose_and_swarm_configs_are_valid(promtool: str, config: str) -> None:
    # Syntax only: its token file is the secret compose mounts at /run/secrets (the local cluster's
    # configuration, written at its start, is checked in full by test_cluster_prometheus).
    assert "SUCCESS" in run(promtool, "check", "config", "--syntax-only", config)


def _config(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((PROMETHEUS / name).read_text())
    return doc


def test_the_swarm_config_differs_from_compose_only_in_the_workers_dns_name() -> None:
    compose, swarm = _config("prometheus.yml"), _config("prometheus-swarm.yml")
    names = [config["scrape_configs"][0]["dns_sd_configs"][0]["names"] for config in (compose, swarm)]
    assert names == [["worker"], ["tasks.worker"]]
    swarm["scrape_configs"][0]["dns_sd_configs"][0]["names"] = ["worker"]
    assert swarm == compose


def test_the_rules_pass_their_unit_tests(promtool: str) -> None:
    out = run(promtool, "test", "rules", *(str(t.relative_to(PROMETHEUS)) for t in TESTS))
    assert out.count("SUCCESS") == len(TESTS)


def _rules() -> list[dict[str, Any]]:
    return [rule for path in RULES for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]]


def _alerts() -> list[str]:
    return [rule["alert"] for rule in _rules() if "alert" in rule]


def test_every_alert_is_tested_firing_and_quiet() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for path in TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (firing if check["exp_alerts"] else quiet).add(check["alertname"])
    alerts = set(_alerts())
    assert len(alerts) == 7
    assert alerts - firing == set(), "alerts without a test that makes them fire"
    assert alerts - quiet == set(), "alerts without a test that keeps them quiet"


def test_every_alert_has_its_runbook_section() -> None:
    headings = {
        line.removeprefix("### ").strip() for line in RUNBOOK.read_text().splitlines() if line.startswith("### ")
    }
    for rule in _rules():
        if "alert" in rule:
            assert rule["alert"] in headings
            assert rule["annotations"]["runbook"] == f"docs/monitoring.md#{rule['alert'].lower()}"


def _exported(registry: CollectorRegistry) -> set[str]:
    return {family.name + suffix for family in registry.collect() for suffix in SUFFIXES.get(family.type, ("",))}


def test_the_rules_read_only_series_the_fleet_exports() -> None:
    exported = _exported(WorkerMetrics().registry) | _exported(LbMetrics().registry)
    read = {name for rule in _rules() for name in re.findall(r"\bmrtr_(?:worker|lb)_\w+", rule["expr"])}
    assert read, "no rule reads the fleet's series"
    assert read - exported == set()
