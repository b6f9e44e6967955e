"""The check with the server given as images, as a user runs it: containers on Docker, our proxy's image in front.

Run by `scripts/fleet-check-compose-e2e` (MRTR_FLEET_CHECK_COMPOSE_E2E=1) once the images are built:
our worker's images `mrtr-worker:v1` and `:v2` (expected: pass), and an image of a server on the official
Python SDK with its default key (expected: refused across instances), `mrtr-lb` the proxy. The tests read
the command's exit status, its JSON report, the logs it saved, and what it left on Docker.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from mrtr_worker.sealing.keyring import new_ring
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # starts containers, the proxy's among them

SCENARIO = """
name = "mrtr-worker-images"

[[call]]
tool = "link_accounts"    # a question a round; version 2 asks one login more

[[call]]
tool = "count_primes"     # hand-backs with no question
arguments = { limit = 300000 }
"""


SDK_SERVER = ROOT / "examples" / "servers" / "python-sdk" / "python_sdk_server.py"
SDK_IMAGE = "mrtr-fleet-check-sdk-server:test"
SDK_DOCKERFILE = """
FROM mrtr-worker:v1
WORKDIR /srv
COPY python_sdk_server.py /srv/
CMD ["sh", "-c", "exec uvicorn python_sdk_server:app --host 0.0.0.0 --port $PORT"]
"""
"""A server on the official Python SDK with its default key, in an image of its own: built on our worker's
image only for the Python and the SDK in it (offline), it runs none of our code."""


OUR_IMAGES = ("--v1-image", "mrtr-worker:v1", "--v2-image", "mrtr-worker:v2")


def check(
    tmp_path: Path, *args: str, images: tuple[str, ...] = OUR_IMAGES, scenario: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`mrtr-fleet-check` on `images` (our worker's, with its scenario, unless told), as a user runs it."""
    if scenario is None:
        scenario = tmp_path / "worker.toml"
        scenario.write_text(SCENARIO)
    argv = [
        str(Path(sys.executable).parent / "mrtr-fleet-check"),
        *(*images, "--scenario", str(scenario), "--instances", "2", "--duration", "5", "--users", "3"),
        *("--grace", "10", "--work-dir", str(tmp_path / "work"), *args),
    ]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def sdk_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    context = tmp_path_factory.mktemp("sdk-image")
    shutil.copy(SDK_SERVER, context)
    (context / "Dockerfile").write_text(SDK_DOCKERFILE)
    engine = docker.from_env()
    engine.images.build(path=str(context), tag=SDK_IMAGE, rm=True)
    yield SDK_IMAGE
    engine.images.remove(SDK_IMAGE)


def left_on_docker() -> list[str]:
    """Containers and networks of any fleet check still on the engine."""
    engine = docker.from_env()
    containers = engine.containers.list(all=True, filters={"label": "mrtr.fleet-check"})
    networks = engine.networks.list(filters={"label": "mrtr.fleet-check"})
    return [str(c.name) for c in containers] + [str(n.name) for n in networks]


def test_our_worker_images_pass_through_a_rolling_update(tmp_path: Path) -> None:
    ring = json.dumps(json.loads(new_ring("fleet-check").dumps()), separators=(",", ":"))
    env_file = tmp_path / "worker.env"
    env_file.write_text(
        "# every container: one key ring, anonymous calls, short slices so a computation hands back\n"
        f"MRTR_WORKER_KEYRING={ring}\nMRTR_WORKER_ALLOW_ANONYMOUS=true\nMRTR_WORKER_MAX_SLICE_MS=200\n"
    )
    report_path = tmp_path / "report.json"
    done = check(tmp_path, "--env-file", str(env_file), "--report", str(report_path))
    assert report_path.exists(), done.stderr
    report: dict[str, Any] = json.loads(report_path.read_text())
    assert report["verdict"] == "pass", done.stdout
    assert done.returncode == 0
    assert report["requests"] == report["completed"] > 0
    assert report["visited_both_versions"] > 0  # the update happened under load: calls begun on v1 ended on v2
    assert report["questions_asked_twice"] == 0
    assert report["hand_backs"] > 0
    assert report["probes"]["across_instances"].startswith("accepted")
    assert report["probes"]["after_upgrade"].startswith("accepted")
    assert report["probes"]["tampered"].startswith("refused")
    work = tmp_path / "work"
    for name in ("v1-0", "v1-1", "v2-0", "v2-1"):  # each container's output, saved when it stopped
        assert "Uvicorn running" in (work / f"{name}.log").read_text()
    assert "backend=http://fleet-check-" in (work / "proxy.log").read_text()  # the proxy's image served the load
    assert left_on_docker() == []


def test_an_sdk_server_image_with_its_default_key_is_refused_across_instances(tmp_path: Path, sdk_image: str) -> None:
    report_path = tmp_path / "report.json"
    done = check(
        tmp_path,
        *("--report", str(report_path), "--expect", "refused_across_instances"),
        images=("--v1-image", sdk_image),
        scenario=ROOT / "examples" / "servers" / "python-sdk" / "scenario.toml",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(report_path.read_text())
    assert report["verdict"] == "refused_across_instances"
    assert report["probes"]["across_instances"] == "refused: Invalid or expired requestState"
    assert report["failures"] > 0  # the load through the proxy's container met the same refusal
    assert report["server_errors"][0]["message"] == "Invalid or expired requestState"
    assert left_on_docker() == []


def test_an_image_that_exits_at_start_is_named_with_its_output(tmp_path: Path) -> None:
    done = check(tmp_path)  # no key ring: the worker refuses to start
    assert done.returncode == 2, done.stdout
    assert "fleet-check: v1-0 exited with" in done.stderr
    assert f"see {tmp_path / 'work' / 'v1-0.log'}" in done.stderr
    assert "MRTR_WORKER_KEYRING" in (tmp_path / "work" / "v1-0.log").read_text()
    assert left_on_docker() == []


def test_an_image_neither_here_nor_pullable_stops_the_check_before_anything_starts(tmp_path: Path) -> None:
    done = check(tmp_path, "--proxy-image", "mrtr-fleet-check-absent:1")
    assert done.returncode == 2, done.stdout
    assert "no image 'mrtr-fleet-check-absent:1' on this engine, and pulling it failed" in done.stderr
    assert "scripts/build-images builds the proxy's" in done.stderr
    assert not (tmp_path / "work" / "v1-0.log").exists()  # no container was started
    assert left_on_docker() == []
