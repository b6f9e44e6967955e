"""The task store with Sentinel on Kubernetes (components/redis-ha, overlays v1-redis-ha and v2-redis-ha).

Offline, on the rendered objects: the names the start scripts, the sentinels and the workers use for
each other must be the names the StatefulSets and their headless Services give the pods; every new
object must land in the fleet's namespace with its label; the NetworkPolicies must admit exactly the
traffic Sentinel needs; the workers' settings must validate as a Sentinel configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mrtr_ops.k8s.render import Manifest
from mrtr_worker.config import WorkerSettings
from mrtr_worker.redis_link import RedisTarget, WaitPolicy, parse_sentinels
from mrtr_worker.sealing.keyring import new_ring
from tests.ops.k8s.objects import container, container_port, env, find, pod_labels, selects

NAMESPACE = "mrtr"


@pytest.fixture(params=["overlays/v1-redis-ha", "overlays/v2-redis-ha"])
def ha(request: pytest.FixtureRequest, rendered: dict[str, list[Manifest]]) -> list[Manifest]:
    manifests: list[Manifest] = rendered[request.param]
    return manifests


def _pods(statefulset: Manifest) -> list[str]:
    """The DNS names a StatefulSet's pods get from its governing headless Service."""
    name, service, replicas = (
        statefulset["metadata"]["name"],
        statefulset["spec"]["serviceName"],
        statefulset["spec"]["replicas"],
    )
    return [f"{name}-{i}.{service}.{NAMESPACE}.svc.cluster.local" for i in range(replicas)]


def _workload_env(workload: Manifest, name: str) -> dict[str, str]:
    return env(container(workload, name))


def test_every_new_object_is_the_fleets(ha: list[Manifest]) -> None:
    for manifest in ha:
        if manifest["kind"] == "Namespace":
            continue
        assert manifest["metadata"].get("namespace") == NAMESPACE, manifest["metadata"]["name"]
        assert manifest["metadata"]["labels"]["app.kubernetes.io/part-of"] == "mrtr-cluster"
    kinds = {(m["kind"], m["metadata"]["name"]) for m in ha}
    assert {("StatefulSet", "sentinel"), ("Service", "sentinel"), ("NetworkPolicy", "sentinel")} <= kinds
    assert {("PodDisruptionBudget", "redis"), ("PodDisruptionBudget", "sentinel")} <= kinds


def test_the_nodes_and_sentinels_name_each_other_as_kubernetes_names_them(ha: list[Manifest]) -> None:
    redis, sentinel = find(ha, "StatefulSet", "redis"), find(ha, "StatefulSet", "sentinel")
    assert redis["spec"]["replicas"] == 3
    assert sentinel["spec"]["replicas"] == 3
    nodes, sentinels = _pods(redis), [f"{pod}:26379" for pod in _pods(sentinel)]
    node_env, sentinel_env = _workload_env(redis, "redis"), _workload_env(sentinel, "sentinel")
    for settings in (node_env, sentinel_env):
        assert settings["MRTR_REDIS_NODES"].split(",") == nodes
        assert settings["MRTR_REDIS_INITIAL_PRIMARY"] == nodes[0]
    assert node_env["MRTR_SENTINELS"].split(",") == sentinels
    assert sentinel_env["MRTR_SENTINEL_PEERS"].split(",") == sentinels
    assert node_env["MRTR_REDIS_ANNOUNCE"] == f"$(POD_NAME).redis.{NAMESPACE}.svc.cluster.local"
    assert sentinel_env["MRTR_SENTINEL_ANNOUNCE"] == f"$(POD_NAME).sentinel.{NAMESPACE}.svc.cluster.local"
    for workload, name in ((redis, "redis"), (sentinel, "sentinel")):
        first = container(workload, name)["env"][0]
        assert first["name"] == "POD_NAME", "$(POD_NAME) expands only from a variable defined before it"
        assert first["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert container_port(container(sentinel, "sentinel"), "sentinel") == 26379
    assert int(sentinel_env["MRTR_SENTINEL_DOWN_AFTER_MS"]) >= 1000


def test_both_run_the_redis_image_through_its_start_scripts(ha: list[Manifest]) -> None:
    redis, sentinel = find(ha, "StatefulSet", "redis"), find(ha, "StatefulSet", "sentinel")
    node, watcher = container(redis, "redis"), container(sentinel, "sentinel")
    assert node["args"] == ["node-start", "--maxmemory", "384mb"], "node-start hands its arguments to redis-server"
    assert watcher["args"] == ["sentinel-start"]
    assert watcher["image"] == node["image"] == "mrtr-redis:latest"
    assert "26379" in " ".join(watcher["readinessProbe"]["exec"]["command"])
    mounts = {m["mountPath"] for m in watcher["volumeMounts"]}
    assert {"/data", "/tmp"} <= mounts, "the root filesystem is read-only: Sentinel rewrites its config in /data"


def test_the_names_answer_before_the_pods_are_ready(ha: list[Manifest]) -> None:
    for name, workload in (("redis", "redis"), ("sentinel", "sentinel")):
        service = find(ha, "Service", name)["spec"]
        assert service["clusterIP"] == "None"
        assert service["publishNotReadyAddresses"] is True, "a starting node or sentinel resolves the others"
        assert find(ha, "StatefulSet", workload)["spec"]["serviceName"] == name


def test_the_workers_reach_redis_through_the_sentinels(ha: list[Manifest], tmp_path: Path) -> None:
    worker, sentinel = find(ha, "Deployment", "worker"), find(ha, "StatefulSet", "sentinel")
    values = _workload_env(worker, "worker")
    ring = tmp_path / "ring.json"
    ring.write_text(new_ring("k").dumps())
    keep = ("REDIS_URL", "REDIS_SENTINELS", "REDIS_SENTINEL_SERVICE", "REDIS_WAIT_REPLICAS")
    settings = WorkerSettings.model_validate(
        {"keyring_file": ring, "allow_anonymous": True} | {k.lower(): values[f"MRTR_WORKER_{k}"] for k in keep}
    )
    sentinels = parse_sentinels([f"{pod}:26379" for pod in _pods(sentinel)])
    assert settings.redis_target() == RedisTarget(sentinels=sentinels, service="mrtr")
    assert settings.redis_wait() == WaitPolicy(1, 500)


def _admitted(policy: Manifest) -> list[dict[str, str]]:
    (rule,) = policy["spec"]["ingress"]
    assert all(set(peer) == {"podSelector"} for peer in rule["from"]), "pods of this namespace only"
    return [peer["podSelector"]["matchLabels"] for peer in rule["from"]]


def test_the_network_policies_admit_what_sentinel_needs_and_no_more(ha: list[Manifest]) -> None:
    pods = {
        name: pod_labels(find(ha, kind, name))
        for kind, name in (
            ("Deployment", "worker"),
            ("Deployment", "lb"),
            ("StatefulSet", "redis"),
            ("StatefulSet", "sentinel"),
        )
    }
    for policy_name, port in (("redis", 6379), ("sentinel", 26379)):
        policy = find(ha, "NetworkPolicy", policy_name)
        target = find(ha, "StatefulSet", policy_name)
        assert selects(policy["spec"]["podSelector"]["matchLabels"], pod_labels(target))
        admitted = _admitted(policy)
        for who in ("worker", "redis", "sentinel"):
            assert any(selects(peer, pods[who]) for peer in admitted), f"{who} -> {policy_name}"
        assert not any(selects(peer, pods["lb"]) for peer in admitted), f"the proxy has no business with {policy_name}"
        (allowed,) = policy["spec"]["ingress"][0]["ports"]
        assert container_port(container(target, policy_name), allowed["port"]) == port


def test_a_drain_never_takes_two_of_a_kind(ha: list[Manifest]) -> None:
    for name in ("redis", "sentinel"):
        budget: dict[str, Any] = find(ha, "PodDisruptionBudget", name)["spec"]
        assert budget["maxUnavailable"] == 1
        assert selects(budget["selector"]["matchLabels"], pod_labels(find(ha, "StatefulSet", name)))
