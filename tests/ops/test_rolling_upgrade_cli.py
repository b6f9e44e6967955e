"""`scripts/rolling-upgrade` against a running `scripts/cluster`, as an operator would run them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mrtr_client import Client, ScriptedInputs
from mrtr_ops.waiting import wait_until
from tests.worker.tasks.tasks_support import TaskClient

pytestmark = pytest.mark.slow  # starts a local cluster
WORKERS = 1
"""The CLI drives the same `RollingUpgrade` as test_versions (a fleet under load); one worker, started
v1 and replaced by v2 and back, is all its own command line needs, at a third of the worker starts."""


@pytest.fixture
def running_cluster(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    url_file = tmp_path / "url"
    process = subprocess.Popen(
        [sys.executable, "-m", "mrtr_ops.local", "--port", "0", "--workers", str(WORKERS), "--work-dir", str(tmp_path),
         "--url-file", str(url_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_until(lambda: url_file.exists() or process.poll() is not None, timeout=60, what="the cluster to come up")
    assert url_file.exists(), "the cluster did not come up"
    yield tmp_path, url_file.read_text()
    process.terminate()
    assert process.wait(60) == 0, "the cluster should stop cleanly on SIGTERM"


def _fleet_versions(work_dir: Path) -> list[int]:
    fleet = httpx.get(f"{(work_dir / 'control.url').read_text()}/fleet").json()
    return sorted(w["version"] for w in fleet["workers"])


def test_upgrade_then_rollback_through_the_cli(running_cluster: tuple[Path, str]) -> None:
    work_dir, mcp_url = running_cluster
    tasks = TaskClient(mcp_url.removesuffix("/mcp"))
    task_id = tasks.create("slow_compute", {"seconds": 0})
    result = tasks.wait_status(task_id)["result"]  # sealed under the old key, alive for the task TTL (an hour)
    upgrade = [sys.executable, "-m", "mrtr_ops.upgrade", "--work-dir", str(work_dir), "--state-ttl", "1"]
    done = subprocess.run([*upgrade, "--steps-file", str(work_dir / "steps.json")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "retire-key" in done.stdout
    assert _fleet_versions(work_dir) == [2] * WORKERS
    (retire,) = [s for s in json.loads((work_dir / "steps.json").read_text()) if s["name"] == "retire-key"]
    assert retire["detail"]["tasks_reseal"]["resealed"] == 1
    assert retire["detail"]["tasks_reseal"]["unreadable"] == 0
    assert tasks.get(task_id)["result"] == result  # still readable with the old key gone
    tasks.close()
    with Client(mcp_url, ScriptedInputs()) as client:
        linked = client.call_tool("link_accounts").structured["linked"]
    assert set(linked) == {"github_login", "google_login", "microsoft_login"}  # v2 asks for Microsoft too

    back = subprocess.run([*upgrade, "--rollback"], capture_output=True, text=True)
    assert back.returncode == 0, back.stderr
    assert _fleet_versions(work_dir) == [1] * WORKERS


def test_the_cli_says_when_no_cluster_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mrtr_ops.upgrade", "--work-dir", str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "no running local cluster" in done.stderr
