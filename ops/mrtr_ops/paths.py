"""Where the checkout is: the ops tools work on its files (compose.yaml, deploy/, loadtest/, secrets/).

The package may be installed anywhere, so the checkout is found from the
working directory (the scripts run from it), or named by `MRTR_PROJECT_ROOT`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT_VARIABLE = "MRTR_PROJECT_ROOT"
_MARKERS = ("compose.yaml", "loadtest/locustfile.py")


class NotACheckout(RuntimeError):
    """Neither `MRTR_PROJECT_ROOT` nor the working directory leads to the project's checkout."""


def project_root() -> Path:
    """The checkout: `$MRTR_PROJECT_ROOT`, else the working directory or the nearest parent with compose.yaml."""
    named = os.environ.get(ROOT_VARIABLE)
    if named:
        return Path(named).resolve()
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents):
        if all((candidate / marker).exists() for marker in _MARKERS):
            return candidate
    raise NotACheckout(f"run this in the project's checkout, or set {ROOT_VARIABLE} (looked upward from {here})")


def compose_project() -> str:
    """The compose project the CLIs act on: `$COMPOSE_PROJECT_NAME`, else compose's default (the checkout's name)."""
    return os.environ.get("COMPOSE_PROJECT_NAME") or re.sub(r"[^a-z0-9_-]", "", project_root().name.lower())


def compose_lb_url() -> str:
    """The compose cluster's proxy as published on this host (`$MRTR_PORT`, default 8080)."""
    return f"http://127.0.0.1:{os.environ.get('MRTR_PORT', '8080')}"


def compose_prometheus_url() -> str:
    """The compose `monitoring` profile's Prometheus on this host (`$MRTR_PROMETHEUS_PORT`, default 9090)."""
    return f"http://127.0.0.1:{os.environ.get('MRTR_PROMETHEUS_PORT', '9090')}"
