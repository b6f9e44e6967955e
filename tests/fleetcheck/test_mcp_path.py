"""`--mcp-path`: the proxy in front forwards the server's own path, not only `/mcp`.

The proxy forwards only its `MRTR_LB_PROXY_PATHS` (`/mcp` unless told); the check tells it the
server's path, so a server at `/rpc` is driven through the proxy as one at `/mcp` is.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # starts two SDK server processes and the proxy

PYTHON_SDK = ROOT / "examples" / "servers" / "python-sdk"


def test_a_server_at_another_path_is_driven_through_the_proxy(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    server = f"{sys.executable} -m uvicorn --app-dir {PYTHON_SDK} python_sdk_server:rpc_app --port {{port}}"
    argv = [
        str(Path(sys.executable).parent / "mrtr-fleet-check"),
        *("--v1", server, "--instances", "2", "--scenario", str(PYTHON_SDK / "scenario.toml"), "--mcp-path", "/rpc"),
        *("--duration", "3", "--users", "2", "--report", str(report), "--work-dir", str(tmp_path / "work")),
        *("--expect", "refused_across_instances"),
    ]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(report.read_text())
    # Through the proxy, the server itself answered: its calls that stayed on one instance completed,
    # those that moved were refused in its own words (a proxy's 404 would be neither).
    assert summary["completed"] > 0
    assert summary["server_errors"][0]["message"] == "Invalid or expired requestState"
