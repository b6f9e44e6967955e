"""`MRTR_LOCUST_STOP_FILE`: a driver ends a headless run before its run time, as the run time would end it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from mrtr_ops.local.process import WorkerSpec
from tests.support.paths import ROOT


def test_a_headless_run_stops_once_the_stop_file_exists(worker: WorkerSpec, tmp_path: Path) -> None:
    stop, summary, events = tmp_path / "stop", tmp_path / "summary.json", tmp_path / "events.jsonl"
    env = {
        **os.environ,
        "MRTR_LOCUST_STOP_FILE": str(stop),
        "MRTR_LOCUST_SUMMARY": str(summary),
        "MRTR_LOCUST_EVENTS": str(events),
    }
    argv = [
        sys.executable, "-m", "locust", "-f", str(ROOT / "loadtest" / "locustfile.py"), "--headless",
        "--only-summary", "-u", "2", "-r", "2", "-t", "600s", "--host", worker.url, "ShortCallsUser",
    ]  # fmt: skip
    with (tmp_path / "locust.log").open("wb") as log:
        locust = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not (events.exists() and events.read_text().count("\n") >= 3):
            assert locust.poll() is None, (tmp_path / "locust.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "no traffic"
            time.sleep(0.1)
        stop.touch()
        exit_code = locust.wait(120)  # far below the 600 s run time
    finally:
        if locust.poll() is None:
            locust.kill()
    doc = json.loads(summary.read_text())
    assert exit_code == 0, (tmp_path / "locust.log").read_text()[-2000:]
    assert doc["requests"] >= 3
    assert doc["failures"] == 0
    assert doc["run"]["ended"] - doc["run"]["started"] < 600
