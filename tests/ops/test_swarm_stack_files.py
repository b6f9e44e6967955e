"""The swarm recipe's compose files keep the rules the swarm and its rolling update depend on (PyYAML; no Docker).

`docker stack deploy` validates each file it reads on its own and refuses
`profiles` and `depends_on` conditions anywhere: compose.yaml, which both
`docker compose` and the swarm read, must stay free of them (they belong in
compose.override.yaml). The swarm override must keep the native rolling update
safe for in-flight requests: start-first, one replica at a time, roll back on
failure, a grace period that covers the drain, discovery through `tasks.worker`.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from mrtr_worker.config import WorkerSettings
from tests.support.compose_files import compose_project, merge
from tests.support.paths import ROOT


def load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((ROOT / name).read_text())
    return document


def seconds(duration: str) -> float:
    """A compose duration (`30s`, `1m30s`, `500ms`) in seconds."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    assert "".join(n + u for n, u in parts) == duration, f"not a duration: {duration}"
    return sum(float(n) * units[u] for n, u in parts)


def test_durations_read_as_seconds() -> None:
    assert seconds("30s") == 30
    assert seconds("1m30s") == 90
    assert seconds("500ms") == 0.5


@pytest.fixture(scope="module")
def base() -> dict[str, Any]:
    return load("compose.yaml")


@pytest.fixture(scope="module")
def swarm() -> dict[str, Any]:
    return load("compose.swarm.yaml")


@pytest.fixture(scope="module")
def loadtest() -> dict[str, Any]:
    return load("compose.swarm-loadtest.yaml")


def test_compose_yaml_holds_nothing_docker_stack_deploy_refuses(base: dict[str, Any]) -> None:
    for name, service in base["services"].items():
        assert "profiles" not in service, f"{name}: profiles belong in compose.override.yaml"
        assert "extends" not in service, f"{name}: extends belongs in compose.override.yaml"
        depends_on = service.get("depends_on", [])
        assert isinstance(depends_on, list), f"{name}: depends_on conditions belong in compose.override.yaml"


def test_the_swarm_stack_is_the_proxy_one_worker_service_and_redis(base: dict[str, Any], swarm: dict[str, Any]) -> None:
    assert set(base["services"]) == {"lb", "worker", "redis"}
    assert set(swarm["services"]) <= set(base["services"])


def test_redis_is_one_task_pinned_to_the_node_of_its_volume(base: dict[str, Any], swarm: dict[str, Any]) -> None:
    redis = merge(base["services"]["redis"], swarm["services"]["redis"])
    assert isinstance(redis, dict)
    assert redis["volumes"] == ["redis-data:/data"]
    assert "redis-data" in base["volumes"]
    assert redis["deploy"]["replicas"] == 1
    assert redis["deploy"]["placement"]["constraints"] == ["node.role == manager"]
    assert "ports" not in redis, "only the workers reach it, inside the stack"
    assert redis["image"] == "${MRTR_REDIS_IMAGE:-mrtr-redis:latest}"
    assert seconds(redis["stop_grace_period"]) >= 10, "time to write the append-only file out"


def test_redis_is_never_two_tasks_on_the_same_data(swarm: dict[str, Any]) -> None:
    """The default `start-first` of the workers would run a second Redis on the same append-only file."""
    deploy = swarm["services"]["redis"]["deploy"]
    assert deploy["update_config"]["order"] == "stop-first"
    assert deploy["rollback_config"]["order"] == "stop-first"
    assert deploy["update_config"]["parallelism"] == 1


def test_the_workers_find_redis_by_its_service_name(base: dict[str, Any], swarm: dict[str, Any]) -> None:
    url = base["x-worker-env"]["MRTR_WORKER_REDIS_URL"]
    assert url == "${MRTR_REDIS_URL-redis://redis:6379/0}"  # `-`, not `:-`: MRTR_REDIS_URL= unsets it (Sentinel)
    assert base["services"]["worker"]["depends_on"] == ["redis"]
    # On the swarm the name must answer with the task's address: a virtual IP goes through the routing
    # mesh, which does not answer everywhere (a swarm e2e run found every task call failing through it).
    assert swarm["services"]["redis"]["deploy"]["endpoint_mode"] == "dnsrr"


def test_the_proxy_finds_the_workers_through_the_swarms_task_dns(swarm: dict[str, Any]) -> None:
    assert swarm["services"]["lb"]["environment"]["MRTR_LB_BACKEND_DNS"] == "tasks.worker:8000"
    assert swarm["services"]["worker"]["deploy"]["endpoint_mode"] == "dnsrr"


def test_the_proxy_publishes_on_the_node_not_through_the_ingress_mesh(swarm: dict[str, Any]) -> None:
    lb = swarm["services"]["lb"]
    assert [port["mode"] for port in lb["ports"]] == ["host"]
    assert lb["ports"][0]["target"] == 8080
    assert lb["deploy"]["endpoint_mode"] == "dnsrr", "in-stack clients reach `lb` without a virtual IP"


def test_the_proxys_admin_listener_is_on_the_network_but_published_nowhere(
    base: dict[str, Any], swarm: dict[str, Any]
) -> None:
    """Its own port on the project (or stack) network, reached there or inside the container; only 8080 goes out."""
    lb = base["services"]["lb"]["environment"]
    assert (lb["MRTR_LB_ADMIN_HOST"], lb["MRTR_LB_ADMIN_PORT"]) == ("0.0.0.0", "8090")
    assert lb["MRTR_LB_ADMIN_TOKEN_FILE"] == "/run/secrets/admin_token"
    assert "ports" not in base["services"]["lb"], "compose.override.yaml publishes, for compose only"
    assert [port["target"] for port in swarm["services"]["lb"]["ports"]] == [8080]
    assert compose_project()["services"]["lb"]["ports"] == ["${MRTR_BIND:-127.0.0.1}:${MRTR_PORT:-8080}:8080"]


def test_the_rolling_update_starts_the_new_task_first_one_at_a_time_and_rolls_back_on_failure(
    swarm: dict[str, Any],
) -> None:
    update = swarm["services"]["worker"]["deploy"]["update_config"]
    assert update["order"] == "start-first"
    assert update["parallelism"] == 1
    assert update["failure_action"] == "rollback"
    assert seconds(update["monitor"]) >= 10, "watch each new task long enough to catch a crash after it is ready"
    rollback = swarm["services"]["worker"]["deploy"]["rollback_config"]
    assert rollback["order"] == "start-first"
    assert rollback["parallelism"] == 1


def test_the_grace_period_covers_the_workers_drain(base: dict[str, Any], swarm: dict[str, Any]) -> None:
    worker = {**base["services"]["worker"], **swarm["services"]["worker"]}
    drain = WorkerSettings.model_fields["drain_timeout_seconds"].default
    assert seconds(worker["stop_grace_period"]) >= drain


def test_the_workers_health_check_is_patient_enough_for_a_busy_node(swarm: dict[str, Any]) -> None:
    check = swarm["services"]["worker"]["healthcheck"]
    assert "test" not in check, "the image's own check on /readyz stays; only its patience changes"
    assert seconds(check["timeout"]) * check["retries"] >= 20


def test_the_worker_image_is_a_variable_so_a_redeploy_keeps_the_running_version(swarm: dict[str, Any]) -> None:
    assert swarm["services"]["worker"]["image"] == "${MRTR_WORKER_IMAGE:-mrtr-worker:v1}"


def test_workers_get_the_ring_and_the_issuers_public_key_as_secrets(base: dict[str, Any]) -> None:
    worker = base["services"]["worker"]
    assert {"keyring", "issuer_public", "admin_token"} <= set(worker["secrets"])
    env = base["x-worker-env"]
    assert env["MRTR_WORKER_JWT_PUBLIC_KEY_FILE"] == "/run/secrets/issuer_public"
    assert env["MRTR_WORKER_ALLOW_ANONYMOUS"] == "false"


def test_locust_runs_distributed_with_the_issuers_private_key(base: dict[str, Any], loadtest: dict[str, Any]) -> None:
    master, worker = loadtest["services"]["locust-master"], loadtest["services"]["locust-worker"]
    assert "--master" in master["command"]
    assert "--worker" in worker["command"]
    assert worker["command"][worker["command"].index("--master-host") + 1] == "locust-master"
    assert master["deploy"]["endpoint_mode"] == "dnsrr", "workers reach port 5557 at the task's own address"
    assert master["deploy"]["restart_policy"]["condition"] == "none", "a finished run is never run again"
    for service in (master, worker):
        assert service["secrets"] == ["issuer_private"]
        assert service["environment"]["MRTR_ISSUER_KEY_FILE"] == "/run/secrets/issuer_private"
    assert "issuer_private" in base["secrets"]


def test_the_headless_run_writes_one_events_file_per_locust_worker() -> None:
    headless = load("tests/e2e/swarm/locust-headless.yaml")
    assert (
        headless["services"]["locust-worker"]["environment"]["MRTR_LOCUST_EVENTS"] == "/out/events-{{.Task.Slot}}.jsonl"
    )
    master_env = headless["services"]["locust-master"]["environment"]
    assert master_env["LOCUST_HEADLESS"] == "true"
    assert master_env["LOCUST_RUN_TIME"].startswith("${MRTR_LOCUST_RUN_TIME")


def test_docker_compose_still_sees_the_whole_cluster_through_the_override() -> None:
    """The split moved the compose-only parts; the project compose reads (both files) is the one it was."""
    project = compose_project()
    services = project["services"]
    fleet = {"lb", "worker", "worker-v2", "redis"}
    assert set(services) == fleet | {"haproxy", "locust-master", "locust-worker", "prometheus", "redis-exporter"}
    assert services["lb"]["depends_on"] == {"worker": {"condition": "service_healthy"}}
    for worker in ("worker", "worker-v2"):
        assert services[worker]["depends_on"] == {"redis": {"condition": "service_healthy"}}, worker
    assert services["lb"]["ports"] == ["${MRTR_BIND:-127.0.0.1}:${MRTR_PORT:-8080}:8080"]
    assert services["haproxy"]["profiles"] == ["haproxy"]
    assert services["locust-master"]["profiles"] == services["locust-worker"]["profiles"] == ["loadtest"]
    assert services["prometheus"]["profiles"] == services["redis-exporter"]["profiles"] == ["monitoring"]
    # Only Prometheus's own port, on loopback by default: the proxy's admin listener stays unpublished.
    assert services["prometheus"]["ports"] == ["${MRTR_BIND:-127.0.0.1}:${MRTR_PROMETHEUS_PORT:-9090}:9090"]
    assert "ports" not in services["redis-exporter"]


def test_worker_v2_is_the_worker_with_another_version_for_compose() -> None:
    worker, v2 = compose_project()["services"]["worker"], compose_project()["services"]["worker-v2"]
    assert v2["environment"] == {
        **worker["environment"],
        "MRTR_WORKER_WRITE_STATE_FORMAT": "${MRTR_V2_WRITE_STATE_FORMAT:-1}",
    }
    assert v2["build"] == {**worker["build"], "args": {**worker["build"]["args"], "WORKER_VERSION": "2"}}
    assert (v2["image"], worker["image"]) == ("mrtr-worker:v2", "mrtr-worker:v1")
    assert v2["networks"] == {"default": {"aliases": ["worker"]}}
    for key in ("secrets", "stop_grace_period", "restart", "depends_on"):
        assert v2[key] == worker[key]
    assert v2["deploy"] == {"replicas": "${MRTR_V2_WORKERS:-0}"}


def test_the_merge_follows_compose_rules() -> None:
    assert merge({"a": {"x": 1, "y": 2}}, {"a": {"y": 3}}) == {"a": {"x": 1, "y": 3}}
    assert merge(["a"], {"a": {"condition": "service_healthy"}}, "depends_on") == {
        "a": {"condition": "service_healthy"}
    }
    assert merge(["a", "b"], ["b", "c"], "secrets") == ["a", "b", "c"]
    assert merge(["locust", "-f"], ["locust", "--worker"], "command") == ["locust", "--worker"]


def test_the_haproxy_profile_forwards_the_same_paths_as_the_proxy_and_bounds_the_head(base: dict[str, Any]) -> None:
    """HAProxy in compose's profile answers 404 to anything but what mrtr_lb forwards (`MRTR_LB_PROXY_PATHS`)."""
    config = (ROOT / "services" / "haproxy" / "haproxy.cfg").read_text()
    (deny,) = re.findall(r"^\s*http-request deny deny_status 404 unless \{ path ([^}]*)\}$", config, re.MULTILINE)
    assert deny.split() == base["services"]["lb"]["environment"]["MRTR_LB_PROXY_PATHS"].split(",")
    assert re.search(r"^\s*timeout http-request 10s$", config, re.MULTILINE)
