"""A run that made no request fails: non-zero exit, the `requests` check failed, and the summary says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mrtr_locust import report
from mrtr_locust.stats import Latency, MrtrStats, percentiles
from tests.support.paths import ROOT

IDLE = Path(__file__).with_name("idle_locustfile.py")
NO_HOST = "http://127.0.0.1:9"
"""Never called: the idle users make no request (the discard port would refuse one anyway)."""


@pytest.mark.slow  # runs Locust
def test_a_headless_run_that_made_no_request_fails_and_says_so(tmp_path: Path) -> None:
    summary, events = tmp_path / "summary.json", tmp_path / "events.jsonl"
    env = {**os.environ, "MRTR_LOCUST_SUMMARY": str(summary), "MRTR_LOCUST_EVENTS": str(events)}
    env.pop("MRTR_LOCUST_STOP_FILE", None)
    argv = [
        sys.executable, "-m", "locust", "-f", str(IDLE), "--headless", "--only-summary",
        "-u", "2", "-r", "2", "-t", "2s", "--host", NO_HOST, "IdleUser",
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    assert "(2 total users)" in output, "the users ran; they made no request"
    doc = json.loads(summary.read_text())
    assert doc["requests"] == 0
    assert doc["thresholds"]["passed"] is False
    assert {"check": "requests", "value": 0, "limit": 1, "ok": False} in doc["thresholds"]["checks"]
    assert not events.exists()
    assert report.NO_REQUESTS in output
    assert "thresholds: FAILED: requests = 0 (limit >= 1)" in output


def test_the_requests_check_passes_once_a_request_is_counted() -> None:
    stats = MrtrStats()
    assert [v.check for v in report.verdicts(stats, {}) if not v.ok] == ["requests"]
    stats.by_class["ShortCallsUser"] = Latency()
    stats.counts["requests"] = 1
    assert all(v.ok for v in report.verdicts(stats, {}))
    doc = report.summary(stats, report.verdicts(stats, {}), {})
    assert report.NO_REQUESTS not in report.text(doc)
    assert "thresholds: passed" in report.text(doc)


def test_percentiles_interpolate_between_ranks_and_never_exceed_the_largest_sample() -> None:
    assert percentiles([]) == [None, None, None]
    assert percentiles([7.0]) == [7.0, 7.0, 7.0]
    assert percentiles([1.0, 2.0, 3.0, 4.0]) == pytest.approx([2.5, 3.85, 3.97])
    hundred = [float(ms) for ms in range(1, 101)]
    assert percentiles(reversed(hundred)) == pytest.approx([50.5, 95.05, 99.01])
    latency = Latency()
    for ms in (10.0, 20.0, 30.0, 1000.0):
        latency.add(ms, failed=False, wrong=False)
    row = latency.summary()
    assert row["p50_ms"] == 25.0
    assert row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"] <= row["max_ms"] == 1000.0
    assert latency.percentile(0.95) == row["p95_ms"]
