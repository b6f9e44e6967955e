"""The `monitoring` component (overlays/v1-monitoring, v2-monitoring): Prometheus and the Redis exporter on
Kubernetes, scraping what compose's Prometheus scrapes, by Kubernetes's names, through what the network
policies admit."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
import yaml

from mrtr_ops.k8s.render import Manifest
from tests.ops.k8s.objects import container, container_port, find, find_prefix, pod_labels, pod_spec, selects
from tests.support.paths import MANIFESTS, ROOT

COMPONENT = MANIFESTS / "components" / "monitoring"
OVERLAYS = ("overlays/v1-monitoring", "overlays/v2-monitoring")
NAMESPACE = "mrtr"


@pytest.fixture(params=OVERLAYS)
def watched(request: pytest.FixtureRequest, rendered: dict[str, list[Manifest]]) -> list[Manifest]:
    manifests: list[Manifest] = rendered[request.param]
    return manifests


def _config(manifests: list[Manifest]) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(
        find_prefix(manifests, "ConfigMap", "prometheus-config")["data"]["prometheus.yml"]
    )
    return config


def _service_address(manifests: list[Manifest], name: str) -> str:
    """`worker.mrtr.svc.cluster.local`: a Service of the rendered fleet, as the cluster's DNS names it."""
    service = find(manifests, "Service", name)
    return f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"


def test_the_configmap_is_the_components_file_and_prometheus_reads_it(watched: list[Manifest]) -> None:
    assert _config(watched) == yaml.safe_load((COMPONENT / "prometheus.yml").read_text())
    prometheus = find(watched, "StatefulSet", "prometheus")
    spec = container(prometheus, "prometheus")
    mounts = {m["name"]: m["mountPath"] for m in spec["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(prometheus)["volumes"]}
    config_name = find_prefix(watched, "ConfigMap", "prometheus-config")["metadata"]["name"]
    assert volumes["config"]["configMap"]["name"] == config_name, "kustomize's hashed name, so a change rolls the pod"
    assert f"--config.file={mounts['config']}/prometheus.yml" in spec["args"]
    token = _config(watched)["scrape_configs"][1]["authorization"]["credentials_file"]
    assert token == f"{mounts['auth']}/admin-token"
    assert volumes["auth"]["secret"]["secretName"] == "mrtr-auth"


def test_it_scrapes_what_compose_scrapes_by_kubernetes_names(watched: list[Manifest]) -> None:
    kubernetes, compose = _config(watched), yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    assert kubernetes["global"] == compose["global"]
    assert [j["job_name"] for j in kubernetes["scrape_configs"]] == [j["job_name"] for j in compose["scrape_configs"]]
    assert [j.get("metrics_path") for j in kubernetes["scrape_configs"]] == [
        j.get("metrics_path") for j in compose["scrape_configs"]
    ]
    # The image's rules (the Dockerfile copies deploy/prometheus/rules there), as compose and swarm read them.
    assert kubernetes["rule_files"] == ["/etc/mrtr/prometheus/rules/*.yml"]
    assert (
        "COPY deploy/prometheus/rules /etc/mrtr/prometheus/rules"
        in (ROOT / "services/prometheus/Dockerfile").read_text()
    )
    workers, lb, redis = kubernetes["scrape_configs"]
    assert workers["dns_sd_configs"] == [
        {"names": [_service_address(watched, "worker")], "type": "A", "port": 8000, "refresh_interval": "5s"}
    ]
    assert find(watched, "Service", "worker")["spec"]["clusterIP"] == "None", "one record per ready worker pod"
    assert lb["dns_sd_configs"][0]["names"] == [_service_address(watched, "lb-admin")]
    assert redis["static_configs"] == [{"targets": [f"{_service_address(watched, 'redis-exporter')}:9121"]}]


def test_the_proxys_admin_port_is_reachable_by_prometheus_alone(watched: list[Manifest]) -> None:
    lb = find(watched, "Deployment", "lb")
    admin = find(watched, "Service", "lb-admin")
    assert admin["spec"]["clusterIP"] == "None", "a DNS name, no virtual IP"
    assert selects(admin["spec"]["selector"], pod_labels(lb))
    (port,) = admin["spec"]["ports"]
    assert port["port"] == container_port(container(lb, "lb"), port["targetPort"]) == 8090
    assert find(watched, "Service", "lb")["spec"]["ports"][0]["port"] == 8080, "the public Service is unchanged"
    policy = find(watched, "NetworkPolicy", "lb")["spec"]
    admitted = [rule["from"][0]["podSelector"]["matchLabels"] for rule in policy["ingress"] if "from" in rule]
    assert admitted == [{"mrtr-lb-admin": "true"}]
    prometheus = pod_labels(find(watched, "StatefulSet", "prometheus"))
    assert selects(admitted[0], prometheus)
    others = [
        w for w in watched if w["kind"] in ("Deployment", "StatefulSet") and w["metadata"]["name"] != "prometheus"
    ]
    assert not any(selects(admitted[0], pod_labels(w)) for w in others)


def test_the_exporter_reaches_redis_and_only_prometheus_reaches_the_exporter(watched: list[Manifest]) -> None:
    exporter = find(watched, "Deployment", "redis-exporter")
    command = container(exporter, "redis-exporter")["command"]
    assert f"-redis.addr=redis://{_service_address(watched, 'redis')}:6379" in command
    into_redis = find(watched, "NetworkPolicy", "redis-from-exporter")["spec"]
    assert selects(into_redis["podSelector"]["matchLabels"], pod_labels(find(watched, "StatefulSet", "redis")))
    assert selects(into_redis["ingress"][0]["from"][0]["podSelector"]["matchLabels"], pod_labels(exporter))
    into_exporter = find(watched, "NetworkPolicy", "redis-exporter")["spec"]
    allowed = into_exporter["ingress"][0]["from"][0]["podSelector"]["matchLabels"]
    assert selects(allowed, pod_labels(find(watched, "StatefulSet", "prometheus")))
    assert not selects(allowed, pod_labels(find(watched, "Deployment", "worker")))


def test_the_overlays_differ_from_their_version_only_by_the_component(rendered: dict[str, list[Manifest]]) -> None:
    for version in ("v1", "v2"):
        plain = {(m["kind"], m["metadata"]["name"]) for m in rendered[f"overlays/{version}"]}
        watched = {(m["kind"], m["metadata"]["name"]) for m in rendered[f"overlays/{version}-monitoring"]}
        assert plain < watched
        assert all(
            m["metadata"].get("namespace", NAMESPACE) == NAMESPACE for m in rendered[f"overlays/{version}-monitoring"]
        )


def test_promtool_accepts_the_config() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is needed: scripts/prometheus-setup installs Debian's prometheus")
    done = subprocess.run(
        [promtool, "check", "config", "--syntax-only", "prometheus.yml"], cwd=COMPONENT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
