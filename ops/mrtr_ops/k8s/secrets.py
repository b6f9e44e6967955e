"""The Secrets the Kubernetes manifests reference, built from the files in `secrets/`.

No secret value is committed: `scripts/compose-secrets` generates the files (the fleet's key ring,
the development issuer's key pair, the admin token), and this module wraps them into Secret
objects for `kubectl apply -f -`. The manifests in `deploy/kubernetes` mount them by name; the
tests check that every Secret and key they reference is one made here.
"""

from __future__ import annotations

import argparse
import base64
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from mrtr_ops.k8s.render import Manifest
from mrtr_ops.paths import project_root

CLUSTER_NAMESPACE = "mrtr"
LOADTEST_NAMESPACE = "mrtr-loadtest"


@dataclass(frozen=True)
class SecretSpec:
    name: str
    namespace: str
    """`cluster` or `loadtest`: which namespace the Secret goes to."""
    files: tuple[str, ...]
    """File names in the secrets directory; each becomes a key of the same name."""


SECRETS = (
    SecretSpec("mrtr-keyring", "cluster", ("keyring.json",)),
    SecretSpec("mrtr-auth", "cluster", ("issuer-public.pem", "admin-token")),
    SecretSpec("mrtr-loadtest-auth", "loadtest", ("issuer-private.pem",)),
)


class MissingSecretFile(RuntimeError):
    pass


def _namespace(name: str) -> Manifest:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def secret_manifests(
    source: Path, *, cluster_namespace: str = CLUSTER_NAMESPACE, loadtest_namespace: str = LOADTEST_NAMESPACE
) -> list[Manifest]:
    """The two Namespaces, then every Secret of `SECRETS` with the contents of SOURCE's files."""
    namespaces = {"cluster": cluster_namespace, "loadtest": loadtest_namespace}
    missing = [name for spec in SECRETS for name in spec.files if not (source / name).is_file()]
    if missing:
        raise MissingSecretFile(f"missing in {source}: {', '.join(missing)} (scripts/compose-secrets makes them)")
    manifests = [_namespace(ns) for ns in dict.fromkeys(namespaces.values())]
    for spec in SECRETS:
        data = {name: base64.b64encode((source / name).read_bytes()).decode() for name in spec.files}
        manifests.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": spec.name, "namespace": namespaces[spec.namespace]},
                "type": "Opaque",
                "data": data,
            }
        )
    return manifests


def main(argv: list[str] | None = None) -> int:
    """`scripts/k8s-secrets`: print the Namespaces and Secrets as YAML, for `kubectl apply -f -`."""
    parser = argparse.ArgumentParser(prog="scripts/k8s-secrets", description=main.__doc__)
    parser.add_argument("--from", dest="source", type=Path, help="directory with the files (default: secrets/)")
    parser.add_argument("--namespace", default=CLUSTER_NAMESPACE, help="the cluster's namespace")
    parser.add_argument("--loadtest-namespace", default=LOADTEST_NAMESPACE, help="Locust's namespace")
    args = parser.parse_args(argv)
    source = args.source
    if source is None:
        subprocess.run([str(project_root() / "scripts" / "compose-secrets")], check=True, stdout=sys.stderr)
        source = project_root() / "secrets"
    try:
        manifests = secret_manifests(
            source, cluster_namespace=args.namespace, loadtest_namespace=args.loadtest_namespace
        )
    except MissingSecretFile as exc:
        print(f"k8s-secrets: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(yaml.safe_dump_all(manifests, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
