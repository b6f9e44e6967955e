"""The worker and proxy objects say what the drain and the discovery need, in both versions' overlays.

Settings are checked against the code that reads them (`WorkerSettings`, the proxy's `Settings`,
the SDK's Host check), and against compose.yaml, which the manifests mirror.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings

from mrtr_lb.config import Settings as LbSettings
from mrtr_lb.config import parse_host_port
from mrtr_ops.k8s.render import Manifest
from mrtr_worker.config import WorkerSettings, environment_names
from tests.ops.k8s.objects import (
    compose_env,
    container,
    container_port,
    env,
    env_names,
    find,
    find_prefix,
    pod_labels,
    pod_spec,
    selects,
    workloads,
)


def _worker(cluster: list[Manifest]) -> Manifest:
    return find(cluster, "Deployment", "worker")


def test_rolling_update_adds_before_it_removes(cluster: list[Manifest]) -> None:
    for name in ("worker", "lb"):
        spec = find(cluster, "Deployment", name)["spec"]
        assert spec["strategy"]["type"] == "RollingUpdate"
        rolling = spec["strategy"]["rollingUpdate"]
        assert rolling["maxUnavailable"] == 0
        assert isinstance(rolling["maxSurge"], int)
        assert rolling["maxSurge"] >= 1
        assert spec["replicas"] >= 2


@pytest.mark.parametrize(("probe", "path"), [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")])
def test_worker_probes(cluster: list[Manifest], probe: str, path: str) -> None:
    worker = container(_worker(cluster), "worker")
    check = worker[probe]["httpGet"]
    assert check["path"] == path
    assert container_port(worker, check["port"]) == 8000
    assert WorkerSettings.model_fields["port"].default == 8000


def test_the_grace_period_covers_the_drain(cluster: list[Manifest]) -> None:
    deployment = _worker(cluster)
    drain = int(
        env(container(deployment, "worker")).get(
            "MRTR_WORKER_DRAIN_TIMEOUT_SECONDS", WorkerSettings.model_fields["drain_timeout_seconds"].default
        )
    )
    assert pod_spec(deployment)["terminationGracePeriodSeconds"] > drain


def test_no_pre_stop_hook_anywhere(rendered: dict[str, list[Manifest]]) -> None:
    """The workers drain on SIGTERM by themselves; no sleep hides a race."""
    for manifests in rendered.values():
        for workload in workloads(manifests):
            for spec in pod_spec(workload)["containers"]:
                assert "preStop" not in spec.get("lifecycle", {}), workload["metadata"]["name"]


def test_the_worker_service_is_headless_and_selects_ready_workers(cluster: list[Manifest]) -> None:
    service = find(cluster, "Service", "worker")
    deployment = _worker(cluster)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"].get("publishNotReadyAddresses", False) is False
    assert selects(service["spec"]["selector"], pod_labels(deployment))
    assert not selects(service["spec"]["selector"], pod_labels(find(cluster, "Deployment", "lb")))
    (port,) = service["spec"]["ports"]
    assert container_port(container(deployment, "worker"), port["targetPort"]) == port["port"] == 8000


def test_the_proxy_discovers_the_workers_by_dns(cluster: list[Manifest]) -> None:
    service = find(cluster, "Service", "worker")
    lb_env = env(container(find(cluster, "Deployment", "lb"), "lb"))
    host, port = parse_host_port(lb_env["MRTR_LB_BACKEND_DNS"])
    assert host == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"
    assert port == service["spec"]["ports"][0]["port"]
    assert float(lb_env["MRTR_LB_DNS_INTERVAL"]) <= 2


def test_the_proxy_settings_are_ones_it_reads(cluster: list[Manifest], monkeypatch: pytest.MonkeyPatch) -> None:
    lb = container(find(cluster, "Deployment", "lb"), "lb")
    assert {name.removeprefix("MRTR_LB_").lower() for name in env_names(lb)} <= set(LbSettings.model_fields)
    for name, value in env(lb).items():
        monkeypatch.setenv(name, value)
    settings = LbSettings()
    assert settings.dns_target is not None
    assert container_port(lb, "http") == settings.port == 8080
    for probe in ("readinessProbe", "livenessProbe"):  # the one admin call that needs no token
        assert container_port(lb, lb[probe]["httpGet"]["port"]) == settings.admin_port == 8090
        assert lb[probe]["httpGet"]["path"] == "/lb/healthz"
    assert settings.admin_host == "0.0.0.0", "on the pod's address: the kubelet probes it there"


def test_the_proxys_admin_port_is_in_no_service_and_only_admitted_pods_reach_it(cluster: list[Manifest]) -> None:
    deployment = find(cluster, "Deployment", "lb")
    lb = container(deployment, "lb")
    admin = container_port(lb, "admin")
    for service in (m for m in cluster if m["kind"] == "Service"):
        for port in service["spec"]["ports"]:
            if selects(service["spec"].get("selector", {}), pod_labels(deployment)):
                assert container_port(lb, port["targetPort"]) != admin, service["metadata"]["name"]
    policy = find(cluster, "NetworkPolicy", "lb")["spec"]
    assert selects(policy["podSelector"]["matchLabels"], pod_labels(deployment))
    assert policy["policyTypes"] == ["Ingress"]
    public, private = policy["ingress"]
    assert "from" not in public, "anyone may reach the public port"
    assert [container_port(lb, p["port"]) for p in public["ports"]] == [8080]
    (peer,) = private["from"]
    assert set(peer) == {"podSelector"}, "pods of this namespace only"
    assert peer["podSelector"]["matchLabels"] == {"mrtr-lb-admin": "true"}
    for workload in (find(cluster, "Deployment", "worker"), deployment):
        assert not selects(peer["podSelector"]["matchLabels"], pod_labels(workload)), "no pod of ours has it"
    assert [container_port(lb, p["port"]) for p in private["ports"]] == [admin]


def test_the_worker_settings_are_ones_it_reads(
    cluster: list[Manifest], monkeypatch: pytest.MonkeyPatch, secrets_dir: Path
) -> None:
    """Every variable is a setting, and the worker accepts the values (files: the Secrets' keys, here)."""
    worker = container(_worker(cluster), "worker")
    assert set(env_names(worker)) <= environment_names(), set(env_names(worker)) - environment_names()
    for name, value in env(worker).items():
        local = secrets_dir / Path(value).name
        monkeypatch.setenv(name, str(local) if name.endswith("_FILE") else value)
    settings = WorkerSettings()
    assert settings.tool_packs == ["demo", "compute"]
    assert settings.allow_anonymous is False
    assert settings.jwt_public_key_file == secrets_dir / "issuer-public.pem"
    assert settings.admin_token_file == secrets_dir / "admin-token"


def test_the_pod_name_is_the_instance_id(cluster: list[Manifest]) -> None:
    (entry,) = [e for e in container(_worker(cluster), "worker")["env"] if e["name"] == "MRTR_WORKER_INSTANCE_ID"]
    assert entry["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def _accepts(allowed: str, host: str) -> bool:
    """The SDK's own Host check, with the worker's allowed hosts."""
    settings = TransportSecuritySettings(allowed_hosts=allowed.split(","))
    return TransportSecurityMiddleware(settings)._validate_host(host)


def test_workers_accept_the_names_clients_use_for_the_proxy(
    cluster: list[Manifest], rendered: dict[str, list[Manifest]]
) -> None:
    """The proxy passes the client's Host through: the Service's names, a port-forward, and Locust's target."""
    allowed = env(container(_worker(cluster), "worker"))["MRTR_WORKER_ALLOWED_HOSTS"]
    service = find(cluster, "Service", "lb")
    name, namespace, port = service["metadata"]["name"], service["metadata"]["namespace"], service["spec"]["ports"][0]
    for host in (name, f"{name}.{namespace}", f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"):
        assert _accepts(allowed, f"{host}:{port['port']}"), host
    assert _accepts(allowed, "127.0.0.1:8080")
    locust_host = find_prefix(rendered["loadtest"], "ConfigMap", "locust")["data"]["LOCUST_HOST"]
    assert _accepts(allowed, locust_host.removeprefix("http://"))
    assert not _accepts(allowed, "evil.example:8080")


def test_the_pdb_covers_exactly_the_workers(cluster: list[Manifest]) -> None:
    pdb = find(cluster, "PodDisruptionBudget", "worker")
    selector = pdb["spec"]["selector"]["matchLabels"]
    assert selects(selector, pod_labels(_worker(cluster)))
    assert selector == _worker(cluster)["spec"]["selector"]["matchLabels"]
    assert not selects(selector, pod_labels(find(cluster, "Deployment", "lb")))
    assert pdb["spec"]["maxUnavailable"] == 1
    assert "minAvailable" not in pdb["spec"]


def test_worker_env_mirrors_compose(cluster: list[Manifest]) -> None:
    """Every setting compose gives the workers, with the same value, except where the platform differs."""
    worker = container(_worker(cluster), "worker")
    k8s = env(worker)
    for name, value in compose_env("worker").items():
        assert name in k8s, name
        # Files are where each platform mounts its secrets (test_secrets checks the k8s ones); Redis's
        # name is the Service's fully qualified one (test_redis checks it).
        if not name.endswith("_FILE") and name not in {"MRTR_WORKER_ALLOWED_HOSTS", "MRTR_WORKER_REDIS_URL"}:
            assert k8s[name] == value, name
    compose_hosts = set(compose_env("worker")["MRTR_WORKER_ALLOWED_HOSTS"].split(","))
    loopback = {h for h in compose_hosts if h.split(":")[0] in {"127.0.0.1", "localhost", "[::1]"}}
    assert loopback <= set(k8s["MRTR_WORKER_ALLOWED_HOSTS"].split(","))


def test_proxy_env_mirrors_compose(cluster: list[Manifest]) -> None:
    k8s = env(container(find(cluster, "Deployment", "lb"), "lb"))
    theirs = compose_env("lb")
    assert set(theirs) == set(k8s)
    assert k8s["MRTR_LB_DNS_INTERVAL"] == theirs["MRTR_LB_DNS_INTERVAL"]
    compose_host, compose_port = parse_host_port(theirs["MRTR_LB_BACKEND_DNS"])
    host, port = parse_host_port(k8s["MRTR_LB_BACKEND_DNS"])
    assert (host.split(".")[0], port) == (compose_host, compose_port)
