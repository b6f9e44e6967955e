"""`python -m mrtr_ops.k8s`: render and validate the Kubernetes manifests (scripts/k8s-validate)."""

import sys

from mrtr_ops.k8s.render import main

if __name__ == "__main__":
    sys.exit(main())
