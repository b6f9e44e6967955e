"""The task store on Kubernetes: one Redis StatefulSet with a volume claim, its headless Service, the workers' URL.

Checked against the files it must agree with: the image compose builds (services/redis: its
command and redis.conf), compose's worker URL (same port and database), the worker Deployment's
labels (the Service and the NetworkPolicy must select Redis and only Redis, admit the workers and
only them). Strict schema validation of the objects is test_validate's; here it is shown to bite
on a StatefulSet too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from urllib.parse import urlsplit

import pytest

from mrtr_ops.k8s.render import Manifest, validation_errors
from tests.ops.k8s.objects import (
    compose,
    compose_env,
    compose_value,
    container,
    container_port,
    env,
    find,
    pod_labels,
    pod_spec,
    selects,
)
from tests.ops.k8s.test_security import quantity
from tests.support.paths import ROOT

REDIS_DIR = ROOT / "services" / "redis"


def redis_conf() -> dict[str, str]:
    lines = (REDIS_DIR / "redis.conf").read_text().splitlines()
    parts = [line.split(None, 1) for line in lines if line.strip() and not line.startswith("#")]
    return {p[0]: p[1] if len(p) > 1 else "" for p in parts}


def image_cmd() -> list[str]:
    (line,) = [line for line in (REDIS_DIR / "Dockerfile").read_text().splitlines() if line.startswith("CMD ")]
    cmd: list[str] = json.loads(line.removeprefix("CMD "))
    return cmd


def _redis(cluster: list[Manifest]) -> Manifest:
    return find(cluster, "StatefulSet", "redis")


def test_one_replica_whose_data_is_a_claim_of_its_own(cluster: list[Manifest]) -> None:
    statefulset = _redis(cluster)
    assert statefulset["spec"]["replicas"] == 1
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert quantity(claim["spec"]["resources"]["requests"]["storage"]) >= 2**30
    mounts = {m["name"]: m["mountPath"] for m in container(statefulset, "redis")["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == redis_conf()["dir"] == "/data"
    pod_volumes = {v["name"] for v in pod_spec(statefulset).get("volumes", [])}
    assert claim["metadata"]["name"] not in pod_volumes, "the claim, not an emptyDir, holds the data"
    retention = statefulset["spec"]["persistentVolumeClaimRetentionPolicy"]
    assert retention == {"whenDeleted": "Retain", "whenScaled": "Retain"}


def test_it_runs_the_image_compose_builds_with_a_memory_bound_under_its_limit(cluster: list[Manifest]) -> None:
    redis = container(_redis(cluster), "redis")
    assert redis["image"] == compose_value(compose()["services"]["redis"]["image"]) == "mrtr-redis:latest"
    args = redis["args"]
    assert args[:2] == image_cmd() == ["redis-server", "/etc/mrtr/redis.conf"]
    maxmemory = args[args.index("--maxmemory") + 1]
    assert maxmemory.endswith("mb")
    assert int(maxmemory.removesuffix("mb")) * 2**20 < quantity(redis["resources"]["limits"]["memory"])
    assert redis_conf()["maxmemory-policy"] == "noeviction"
    assert redis_conf()["appendonly"] == "yes"


def test_it_is_ready_once_it_answers_pong(cluster: list[Manifest]) -> None:
    redis = container(_redis(cluster), "redis")
    for probe in ("startupProbe", "readinessProbe"):
        command = " ".join(redis[probe]["exec"]["command"])
        assert 'redis-cli -p 6379 ping)" = PONG' in command, probe
    assert container_port(redis, redis["livenessProbe"]["tcpSocket"]["port"]) == int(redis_conf()["port"]) == 6379
    startup = redis["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 120, "time to read a large append-only file"


def test_the_headless_service_governs_the_statefulset_and_selects_only_redis(cluster: list[Manifest]) -> None:
    service, statefulset = find(cluster, "Service", "redis"), _redis(cluster)
    assert statefulset["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"
    selector = service["spec"]["selector"]
    assert selects(selector, pod_labels(statefulset))
    for other in ("worker", "lb"):
        assert not selects(selector, pod_labels(find(cluster, "Deployment", other)))
    (port,) = service["spec"]["ports"]
    assert container_port(container(statefulset, "redis"), port["targetPort"]) == port["port"] == 6379


def test_every_worker_gets_the_services_url_with_composes_port_and_database(cluster: list[Manifest]) -> None:
    service = find(cluster, "Service", "redis")
    url = urlsplit(env(container(find(cluster, "Deployment", "worker"), "worker"))["MRTR_WORKER_REDIS_URL"])
    theirs = urlsplit(compose_env("worker")["MRTR_WORKER_REDIS_URL"])
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    assert url.hostname == f"{name}.{namespace}.svc.cluster.local"
    assert (url.scheme, url.port, url.path) == (theirs.scheme, theirs.port, theirs.path) == ("redis", 6379, "/0")
    assert theirs.hostname == name, "compose's service and the Kubernetes Service have one name"
    assert url.port == service["spec"]["ports"][0]["port"]


def test_only_the_workers_may_reach_redis(cluster: list[Manifest]) -> None:
    policy = find(cluster, "NetworkPolicy", "redis")["spec"]
    redis, worker, lb = _redis(cluster), find(cluster, "Deployment", "worker"), find(cluster, "Deployment", "lb")
    assert selects(policy["podSelector"]["matchLabels"], pod_labels(redis))
    assert not selects(policy["podSelector"]["matchLabels"], pod_labels(worker))
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"}, "no namespaceSelector or ipBlock: pods of this namespace only"
    assert selects(peer["podSelector"]["matchLabels"], pod_labels(worker))
    assert not selects(peer["podSelector"]["matchLabels"], pod_labels(lb))
    (port,) = rule["ports"]
    assert container_port(container(redis, "redis"), port["port"]) == 6379


def _misspell_claim_templates(s: Manifest) -> None:
    s["spec"]["volumeClaimTemplate"] = s["spec"].pop("volumeClaimTemplates")


def _claim_size_as_list(s: Manifest) -> None:
    s["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"] = ["1Gi"]


def _no_service_name_type(s: Manifest) -> None:
    s["spec"]["serviceName"] = 6379


def _exec_probe_as_text(s: Manifest) -> None:
    container(s, "redis")["readinessProbe"]["exec"]["command"] = "redis-cli ping"


BREAKAGES: dict[str, Callable[[Manifest], None]] = {
    "misspelt volumeClaimTemplates": _misspell_claim_templates,
    "claim requests as a list": _claim_size_as_list,
    "serviceName of the wrong type": _no_service_name_type,
    "probe command as a string": _exec_probe_as_text,
}


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_broken_statefulset_fails_validation(rendered: dict[str, list[Manifest]], breakage: str) -> None:
    statefulset = copy.deepcopy(_redis(rendered["overlays/v1"]))
    assert validation_errors(statefulset) == []
    BREAKAGES[breakage](statefulset)
    errors = validation_errors(statefulset)
    assert len(errors) == 1
    assert errors[0].startswith("StatefulSet/mrtr/redis: ")
