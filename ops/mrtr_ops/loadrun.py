"""The Locust suite as a bounded background load for the walkthrough and the chaos run.

Both run `loadtest/locustfile.py` headless against the proxy, with every
answer checked, and read its per-request events (`events.jsonl`) afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mrtr_ops.paths import project_root
from mrtr_ops.waiting import wait_until

RELAXED_P95 = {
    f"MRTR_LOCUST_P95_{name}_MS": "600000"
    for name in ("SHORT", "COMPUTE", "LOGIN", "ELICITATION", "SAMPLING_ROOTS", "MIXED")
}
"""Latency bounds out of the way (loadtest/mrtr_locust/limits.py names them): under injected faults latency
is a figure to report, not a pass mark; Locust's exit code then speaks of failures and wrong answers only."""


def start_locust(url: str, out: Path, duration: int, users: int, extra_env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Locust headless for `duration` seconds; events and summary into `out`, its output into `out/locust.log`.

    With `MRTR_LOCUST_STOP_FILE` in `extra_env` the run ends earlier once that file exists (`stop_locust`).
    """
    env = {
        **os.environ,
        **extra_env,
        "MRTR_LOCUST_EVENTS": str(out / "events.jsonl"),
        "MRTR_LOCUST_SUMMARY": str(out / "locust-summary.json"),
    }
    argv = [
        str(Path(sys.executable).parent / "locust"), "-f", str(project_root() / "loadtest" / "locustfile.py"),
        "--headless", "--host", url, "-u", str(users), "-r", str(max(1, users // 2)),
        "--run-time", f"{duration}s", "--stop-timeout", "30", "--only-summary",
    ]  # fmt: skip
    log = (out / "locust.log").open("wb")
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=project_root())


def wait_for_traffic(events: Path, locust: subprocess.Popen[bytes], at_least: int, timeout: float) -> bool:
    """Until `at_least` requests completed (or Locust ended, or the deadline passed); whether they did."""

    def enough() -> bool:
        if not events.exists():
            return False
        with events.open() as lines:
            return sum(1 for _ in lines) >= at_least

    try:
        wait_until(
            lambda: enough() or locust.poll() is not None,
            timeout=timeout,
            interval=0.2,
            what=f"{at_least} requests of the load",
        )
    except TimeoutError:
        return False
    return enough()


def stop_locust(stop_file: Path) -> None:
    """End a run started with `MRTR_LOCUST_STOP_FILE=stop_file`, as its run time would (users finish first)."""
    stop_file.touch()
