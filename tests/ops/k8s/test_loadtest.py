"""Distributed Locust: the master and workers are wired to each other, to the suite, and to the proxy.

The containers' command lines and environment are read by Locust's own argument parser (in a
subprocess: importing Locust patches the interpreter with gevent), so "--master" means what
Locust means by it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mrtr_ops.k8s.render import Manifest, render
from tests.ops.k8s.objects import (
    compose,
    compose_value,
    container,
    container_port,
    find,
    find_prefix,
    pod_labels,
    selects,
)
from tests.support.paths import MANIFESTS, ROOT

PARSE = """
import json, os, sys
from locust.argument_parser import get_parser
out = []
for argv, env in json.loads(sys.stdin.read()):
    os.environ.update(env)
    options = get_parser(default_config_files=[]).parse_args(argv)
    out.append({key: getattr(options, key) for key in (
        "master", "worker", "master_host", "master_port", "master_bind_port", "host", "locustfile", "web_port")})
    for key in env:
        del os.environ[key]
print(json.dumps(out))
"""


def _locust_options(manifests: list[Manifest], *names: str) -> list[dict[str, Any]]:
    """How Locust reads each named Deployment's command line and environment (its ConfigMap included)."""
    config = find_prefix(manifests, "ConfigMap", "locust")
    runs = []
    for name in names:
        spec = container(find(manifests, "Deployment", name), "locust")
        assert spec["command"][0] == "locust"
        (source,) = spec["envFrom"]
        assert source["configMapRef"]["name"] == config["metadata"]["name"]
        environment = {**config["data"], **{e["name"]: e["value"] for e in spec.get("env", []) if "value" in e}}
        runs.append((spec["command"][1:], environment))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCUST_")}
    done = subprocess.run(
        [sys.executable, "-c", PARSE], input=json.dumps(runs), capture_output=True, text=True, env=env, check=True
    )
    options: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return options


@pytest.fixture(scope="module")
def options(rendered: dict[str, list[Manifest]]) -> dict[str, dict[str, Any]]:
    """Locust's reading of the master's and the workers' configuration."""
    master, worker = _locust_options(rendered["loadtest"], "locust-master", "locust-worker")
    return {"master": master, "worker": worker}


def test_master_and_workers_are_wired(rendered: dict[str, list[Manifest]], options: dict[str, dict[str, Any]]) -> None:
    manifests = rendered["loadtest"]
    master, worker = options["master"], options["worker"]
    assert master["master"] is True
    assert master["worker"] is False
    assert worker["worker"] is True
    assert worker["master"] is False

    service = find(manifests, "Service", "locust-master")
    master_deployment = find(manifests, "Deployment", "locust-master")
    assert selects(service["spec"]["selector"], pod_labels(master_deployment))
    assert not selects(service["spec"]["selector"], pod_labels(find(manifests, "Deployment", "locust-worker")))
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    master_container = container(master_deployment, "locust")
    assert worker["master_host"] == service["metadata"]["name"]
    assert worker["master_port"] == ports["master"]["port"] == master["master_bind_port"]
    assert container_port(master_container, ports["master"]["targetPort"]) == master["master_bind_port"]
    assert container_port(master_container, ports["web"]["targetPort"]) == master["web_port"] == 8089
    assert find(manifests, "Deployment", "locust-worker")["spec"]["replicas"] >= 2


def test_they_run_the_project_suite_from_the_loadtest_image(
    rendered: dict[str, list[Manifest]], options: dict[str, dict[str, Any]]
) -> None:
    manifests = rendered["loadtest"]
    image = compose_value(compose()["services"]["locust-master"]["image"])
    copies = [line.split()[1:] for line in (ROOT / "loadtest" / "Dockerfile").read_text().splitlines()]
    assert any(c[-1].rstrip("/") == "/app/loadtest" and "loadtest/locustfile.py" in c[:-1] for c in copies if c)
    for option in options.values():
        assert option["locustfile"] == "/app/loadtest/locustfile.py"
        assert (ROOT / "loadtest" / "locustfile.py").is_file()
    for name in ("locust-master", "locust-worker"):
        assert container(find(manifests, "Deployment", name), "locust")["image"] == image


def test_they_target_the_proxy_service(rendered: dict[str, list[Manifest]], options: dict[str, dict[str, Any]]) -> None:
    lb = find(rendered["overlays/v1"], "Service", "lb")
    meta = lb["metadata"]
    assert (
        options["master"]["host"]
        == f"http://{meta['name']}.{meta['namespace']}.svc.cluster.local:{lb['spec']['ports'][0]['port']}"
    )


def test_the_workers_mint_tokens_with_the_issuer_key(rendered: dict[str, list[Manifest]]) -> None:
    """As compose's Locust workers do; the users run on the workers, so only they need the key."""
    worker = find(rendered["loadtest"], "Deployment", "locust-worker")
    variables = {e["name"]: e["value"] for e in container(worker, "locust")["env"]}
    assert set(compose()["services"]["locust-worker"]["environment"]) == set(variables)
    key_file = variables["MRTR_ISSUER_KEY_FILE"]
    mounts = {m["mountPath"]: m["name"] for m in container(worker, "locust")["volumeMounts"]}
    volume = {v["name"]: v for v in worker["spec"]["template"]["spec"]["volumes"]}[mounts[str(Path(key_file).parent)]]
    assert volume["secret"]["secretName"] == "mrtr-loadtest-auth"


def test_pointing_at_a_cluster_elsewhere(kubectl_path: Path, tmp_path: Path) -> None:
    """The overlay docs/kubernetes.md shows: only the target changes, in both Deployments."""
    overlay = tmp_path / "remote"
    overlay.mkdir()
    base = os.path.relpath(MANIFESTS / "loadtest", overlay)
    (overlay / "kustomization.yaml").write_text(
        f"resources:\n  - {base}\n"
        "configMapGenerator:\n"
        "  - name: locust\n    behavior: merge\n    literals:\n      - LOCUST_HOST=https://mcp.example.com\n"
    )
    manifests = render(kubectl_path, overlay)
    master, worker = _locust_options(manifests, "locust-master", "locust-worker")
    assert master["host"] == worker["host"] == "https://mcp.example.com"
    assert master["locustfile"] == "/app/loadtest/locustfile.py"
