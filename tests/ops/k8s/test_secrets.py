"""Secrets: no value is committed; every Secret and key a pod mounts is one `scripts/k8s-secrets` makes.

The files are generated here the way `scripts/compose-secrets` makes them for compose (the
`secrets_dir` fixture): a key ring, the development issuer's key pair, an admin token.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mrtr_ops.k8s.render import KUSTOMIZATIONS, Manifest, validate_all
from mrtr_ops.k8s.secrets import (
    CLUSTER_NAMESPACE,
    LOADTEST_NAMESPACE,
    SECRETS,
    MissingSecretFile,
    secret_manifests,
)
from tests.ops.k8s.objects import pod_spec, workloads
from tests.support.paths import MANIFESTS, ROOT

NAMESPACE_OF = {"cluster": CLUSTER_NAMESPACE, "loadtest": LOADTEST_NAMESPACE}


def _secret_files(pod: dict[str, Any], namespace: str) -> dict[str, str]:
    """Path in the container -> 'secret/key', for every file a Secret volume puts there."""
    volumes = {v["name"]: v["secret"] for v in pod.get("volumes", []) if "secret" in v}
    files = {}
    for spec in pod["containers"]:
        for mount in spec.get("volumeMounts", []):
            secret = volumes.get(mount["name"])
            if secret is None:
                continue
            made = [s for s in SECRETS if s.name == secret["secretName"] and NAMESPACE_OF[s.namespace] == namespace]
            assert len(made) == 1, f"{secret['secretName']} in {namespace} is not made by scripts/k8s-secrets"
            items = secret.get("items") or [{"key": name, "path": name} for name in made[0].files]
            for item in items:
                assert item["key"] in made[0].files, item
                files[f"{mount['mountPath']}/{item['path']}"] = f"{secret['secretName']}/{item['key']}"
    return files


def test_every_mounted_secret_is_made_and_every_file_setting_points_into_one(
    rendered: dict[str, list[Manifest]],
) -> None:
    used = set()
    for name in KUSTOMIZATIONS:
        for workload in workloads(rendered[name]):
            pod = pod_spec(workload)
            files = _secret_files(pod, workload["metadata"]["namespace"])
            used |= set(files.values())
            for spec in pod["containers"]:
                for entry in spec.get("env", []):
                    if entry["name"].endswith("_FILE"):
                        assert entry["value"] in files, (workload["metadata"]["name"], entry)
    assert used == {f"{s.name}/{f}" for s in SECRETS for f in s.files}


def test_the_keyring_is_mounted_as_a_directory(rendered: dict[str, list[Manifest]]) -> None:
    """No subPath: kubelet then updates a rotated ring in running pods too."""
    for name in KUSTOMIZATIONS:
        for workload in workloads(rendered[name]):
            for spec in pod_spec(workload)["containers"]:
                assert all("subPath" not in m for m in spec.get("volumeMounts", []))


def test_secrets_are_built_from_the_files(secrets_dir: Path) -> None:
    manifests = secret_manifests(secrets_dir)
    assert validate_all(manifests) == []
    assert [m["metadata"]["name"] for m in manifests if m["kind"] == "Namespace"] == [
        CLUSTER_NAMESPACE,
        LOADTEST_NAMESPACE,
    ]
    built = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "Secret"}
    assert set(built) == {s.name for s in SECRETS}
    for spec in SECRETS:
        secret = built[spec.name]
        assert secret["metadata"]["namespace"] == NAMESPACE_OF[spec.namespace]
        for file in spec.files:
            assert base64.b64decode(secret["data"][file]) == (secrets_dir / file).read_bytes()


def test_a_missing_file_is_named(secrets_dir: Path) -> None:
    (secrets_dir / "admin-token").unlink()
    with pytest.raises(MissingSecretFile, match="admin-token"):
        secret_manifests(secrets_dir)


def test_no_secret_value_is_committed() -> None:
    committed = subprocess.run(
        ["git", "ls-files", str(MANIFESTS)], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert committed
    for path in committed:
        text = (ROOT / path).read_text()
        assert "PRIVATE KEY" not in text, path
        if not path.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(text):
            assert not (doc and doc.get("kind") == "Secret"), path
            assert "secretGenerator" not in (doc or {}), path


def test_the_secrets_command_prints_them_for_kubectl_apply(secrets_dir: Path) -> None:
    done = subprocess.run(
        [str(ROOT / "scripts" / "k8s-secrets"), "--from", str(secrets_dir), "--namespace", "mrtr-staging"],
        capture_output=True,
        text=True,
        check=True,
    )
    docs = list(yaml.safe_load_all(done.stdout))
    assert [d["kind"] for d in docs] == ["Namespace", "Namespace", "Secret", "Secret", "Secret"]
    assert {d["metadata"]["namespace"] for d in docs if d["kind"] == "Secret"} == {"mrtr-staging", LOADTEST_NAMESPACE}
    assert validate_all(docs) == []
