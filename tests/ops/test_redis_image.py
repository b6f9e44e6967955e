"""The `redis` image and service: Debian's redis-server, built like the haproxy image, non-root, durable, checked.

Offline checks of the files (no Docker): the Dockerfile, its redis.conf, and the compose project.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.ops.k8s.objects import compose, compose_value, dockerfile_user
from tests.support.paths import ROOT

DOCKERFILE = ROOT / "services" / "redis" / "Dockerfile"
CONF = ROOT / "services" / "redis" / "redis.conf"


def conf() -> dict[str, str]:
    """redis.conf as directive -> arguments (comments and blank lines left out)."""
    lines = [line.split(None, 1) for line in CONF.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return {parts[0]: parts[1] if len(parts) > 1 else "" for parts in lines}


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    found: dict[str, Any] = compose()["services"]
    return found


def test_the_image_installs_debians_redis_server_on_the_overridable_base() -> None:
    text = DOCKERFILE.read_text()
    assert "ARG BASE_IMAGE=debian:bookworm-slim\nFROM ${BASE_IMAGE}\n" in text
    assert "apt-get install -y -qq --no-install-recommends redis-server" in text
    assert "rm -rf /var/lib/apt/lists/*" in text
    assert 'CMD ["redis-server", "/etc/mrtr/redis.conf"]' in text
    assert "COPY services/redis/redis.conf /etc/mrtr/redis.conf" in text


def test_the_image_runs_as_the_projects_non_root_user_with_a_health_check() -> None:
    assert dockerfile_user(DOCKERFILE) == "10001"
    text = DOCKERFILE.read_text()
    assert "useradd --system --uid 10001 --gid 10001" in text
    assert "chown 10001:10001 /data" in text
    (healthcheck,) = [line for line in text.splitlines() if line.startswith("HEALTHCHECK")]
    check = text[text.index(healthcheck) :].split("\n", 2)[1]
    assert "redis-cli -p 6379 ping" in check
    assert "= PONG" in check, "LOADING (the append-only file read back) is not healthy yet"


def test_the_server_keeps_an_append_only_file_in_the_volume() -> None:
    settings = conf()
    assert settings["appendonly"] == "yes"
    assert settings["appendfsync"] == "everysec"
    assert settings["dir"] == "/data"
    assert settings["port"] == "6379"
    assert settings["logfile"] == '""'
    assert settings["daemonize"] == "no"
    assert settings["maxmemory-policy"] == "noeviction", "a live task is never evicted to make room"
    assert "VOLUME /data" in DOCKERFILE.read_text()


def test_compose_builds_it_like_the_haproxy_image(services: dict[str, Any]) -> None:
    redis, haproxy = services["redis"], services["haproxy"]
    assert redis["build"]["dockerfile"] == "services/redis/Dockerfile"
    assert redis["build"]["args"]["BASE_IMAGE"] == haproxy["build"]["args"]["BASE_IMAGE"]
    assert compose_value(redis["build"]["args"]["BASE_IMAGE"]) == "debian:bookworm-slim"
    assert "${MRTR_DEBIAN_IMAGE:-" in redis["build"]["args"]["BASE_IMAGE"], "the offline build's variable"
    assert compose_value(redis["image"]) == "mrtr-redis:latest"
    assert "profiles" not in redis, "scripts/build-images and `docker compose up` include it"


def test_compose_keeps_its_data_in_a_named_volume_and_does_not_publish_it(services: dict[str, Any]) -> None:
    redis = services["redis"]
    assert redis["volumes"] == ["redis-data:/data"]
    assert "redis-data" in compose()["volumes"]
    assert "ports" not in redis
    assert redis["restart"] == "unless-stopped"


def test_every_worker_service_gets_the_url_of_the_redis_service(services: dict[str, Any]) -> None:
    for name in ("worker", "worker-v2"):
        url = compose_value(services[name]["environment"]["MRTR_WORKER_REDIS_URL"])
        assert url == "redis://redis:6379/0", name
        assert url.split("//")[1].split(":")[0] in services
        assert int(url.rsplit(":", 1)[1].split("/")[0]) == int(conf()["port"])


def test_the_offline_build_gives_redis_the_local_debian_base() -> None:
    script = (ROOT / "scripts" / "build-images").read_text()
    assert "MRTR_DEBIAN_IMAGE=mrtr-base:bookworm" in script
    assert "docker compose --profile haproxy --profile loadtest --profile monitoring build" in script
