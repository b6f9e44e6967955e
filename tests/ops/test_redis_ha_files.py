"""Redis with Sentinel in compose and swarm (compose.redis-ha.yaml) and in the image, checked offline.

The overlay must name every node and sentinel consistently (the start scripts find each other by
these names), keep what `docker stack deploy` refuses out, give each node and sentinel its own
volume, and leave the workers a valid Sentinel configuration; the plain store stays compose's default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mrtr_worker.config import WorkerSettings
from mrtr_worker.redis_link import RedisTarget, WaitPolicy
from mrtr_worker.sealing.keyring import new_ring
from tests.ops.k8s.objects import compose_value
from tests.support.compose_files import compose_project, merge
from tests.support.paths import ROOT

OVERLAY = ROOT / "compose.redis-ha.yaml"
DOCKERFILE = ROOT / "services" / "redis" / "Dockerfile"
NODES = ("redis", "redis-replica-1", "redis-replica-2")
SENTINELS = ("sentinel-1", "sentinel-2", "sentinel-3")


@pytest.fixture(scope="module")
def overlay() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(OVERLAY.read_text())
    return document


@pytest.fixture(scope="module")
def project(overlay: dict[str, Any]) -> dict[str, Any]:
    """compose.yaml + compose.override.yaml + the overlay, as `docker compose -f ... -f ... -f ...` merges them."""
    merged: dict[str, Any] = merge(compose_project(), overlay)  # type: ignore[assignment]  # dict over dict
    return merged


def _env(service: dict[str, Any]) -> dict[str, str]:
    return {key: compose_value(value) for key, value in (service.get("environment") or {}).items()}


def _settings(tmp_path: Path, env: dict[str, str]) -> WorkerSettings:
    ring = tmp_path / "ring.json"
    ring.write_text(new_ring("k").dumps())
    values = {key.removeprefix("MRTR_WORKER_").lower(): value for key, value in env.items()}
    keep = {"redis_url", "redis_sentinels", "redis_sentinel_service", "redis_wait_replicas"}
    chosen = {k: v for k, v in values.items() if k in keep}
    return WorkerSettings.model_validate({"keyring_file": ring, "allow_anonymous": True, **chosen})


def test_the_overlay_holds_nothing_docker_stack_deploy_refuses(overlay: dict[str, Any]) -> None:
    for name, service in overlay["services"].items():
        assert "profiles" not in service, name
        assert not isinstance(service.get("depends_on"), dict), f"{name}: start conditions break the swarm recipe"
        assert "extends" not in service, name


def test_every_node_and_sentinel_knows_the_set_by_the_same_names(project: dict[str, Any]) -> None:
    services = project["services"]
    sentinel_addresses = ",".join(f"{name}:26379" for name in SENTINELS)
    for name in (*NODES, *SENTINELS):
        env = _env(services[name])
        assert env["MRTR_REDIS_NODES"] == ",".join(NODES), name
        assert env["MRTR_REDIS_INITIAL_PRIMARY"] == "redis", name
        assert env["MRTR_SENTINELS"] == sentinel_addresses, name
    for name in NODES:
        service = services[name]
        assert service["command"] == ["node-start"], name
        assert _env(service)["MRTR_REDIS_ANNOUNCE"] == name, "replicas announce the name the others resolve"
        assert compose_value(service["image"]) == "mrtr-redis:latest", name
    for name in SENTINELS:
        service, env = services[name], _env(services[name])
        assert service["command"] == ["sentinel-start"], name
        assert env["MRTR_SENTINEL_ANNOUNCE"] == name
        assert sorted(env["MRTR_SENTINEL_PEERS"].split(",")) == [f"{s}:26379" for s in SENTINELS if s != name]
        assert "26379" in " ".join(service["healthcheck"]["test"]), "the image's own check pings 6379"
    assert int(_env(services["sentinel-1"])["MRTR_SENTINEL_DOWN_AFTER_MS"]) >= 1000


def test_each_node_and_sentinel_has_a_volume_of_its_own(project: dict[str, Any], overlay: dict[str, Any]) -> None:
    services = project["services"]
    for name in (*NODES[1:], *SENTINELS):  # the swarm never runs two tasks on one volume (`redis`: compose.swarm.yaml)
        assert overlay["services"][name]["deploy"]["update_config"]["order"] == "stop-first", name
    mounts = [services[name]["volumes"][0] for name in (*NODES, *SENTINELS)]
    assert all(mount.endswith(":/data") for mount in mounts)
    volumes = [mount.split(":")[0] for mount in mounts]
    assert len(set(volumes)) == len(volumes)
    assert set(volumes) <= set(project["volumes"])


def test_the_workers_reach_redis_through_the_sentinels_and_wait_for_a_replica(
    project: dict[str, Any], tmp_path: Path
) -> None:
    settings = _settings(tmp_path, _env(project["services"]["worker"]))
    assert settings.redis_target() == RedisTarget(sentinels=tuple((name, 26379) for name in SENTINELS), service="mrtr")
    assert settings.redis_wait() == WaitPolicy(1, 500)


def test_without_the_overlay_compose_keeps_the_one_redis(tmp_path: Path) -> None:
    services = compose_project()["services"]
    for name in ("worker", "worker-v2"):
        settings = _settings(tmp_path, _env(services[name]))
        assert settings.redis_target() == RedisTarget(url="redis://redis:6379/0"), name
        assert not settings.redis_wait().on
    assert "command" not in services["redis"], "the plain store runs the image's CMD"
    assert not any(name.startswith("sentinel") for name in services)


def test_the_image_carries_sentinel_and_the_start_scripts() -> None:
    text = DOCKERFILE.read_text()
    assert "--no-install-recommends redis-server redis-sentinel" in text
    assert "COPY services/redis/node-start services/redis/sentinel-start /usr/local/bin/" in text
    for script in ("node-start", "sentinel-start"):
        path = ROOT / "services" / "redis" / script
        assert path.stat().st_mode & 0o111, f"{script} must be executable in the image"
        assert path.read_text().startswith("#!/bin/sh\n"), "Debian's slim image has sh, not bash"
