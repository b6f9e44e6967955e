"""A short walkthrough, as CI runs it: the rolling upgrade under Locust load, and the report's figures.

Prometheus watches it (`--prometheus`, scripts/prometheus-setup): the report sets its view beside Locust's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a short walkthrough: a cluster and Locust


def test_a_short_walkthrough_loses_nothing_and_crosses_versions(tmp_path: Path) -> None:
    out = tmp_path / "report"
    argv = ["--duration", "60", "--out", str(out), "--users", "6", "--prometheus"]
    done = subprocess.run(
        [sys.executable, "-m", "mrtr_ops.walkthrough", *argv],
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = json.loads((out / "summary.json").read_text())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert summary["requests"] > 0
    assert summary["failures"] == 0
    assert summary["wrong_answers"] == 0
    assert summary["reasked_questions"] == 0
    assert summary["requests_both_versions"] > 0
    assert [s["name"] for s in summary["steps"]][-3:] == ["contract-format", "promote-key", "retire-key"]
    assert summary["completed_by_version"].get("2", 0) > 0
    assert summary["tasks_created"] > 0, "the load includes tasks in flight"
    assert summary["tasks_wrong"] == 0
    assert summary["tasks_lost"] == 0
    assert summary["tasks_completed"] == summary["tasks_created"]
    assert f"| tasks created | {summary['tasks_created']} |" in (out / "summary.md").read_text()
    assert (out / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "requests that visited both versions" in (out / "summary.md").read_text()
    assert re.search(r"watch the upgrade live at http://127\.0\.0\.1:\d+/consoles/mrtr\.html", done.stdout)
    seen = summary["prometheus"]
    assert seen["calls_by_version"]["1"] > 0
    assert seen["calls_by_version"]["2"] > 0
    assert set(seen["calls_per_s_by_version"]) == {"1", "2"}
    report = (out / "summary.md").read_text()
    assert "## What Prometheus saw" in report
    assert "The two agree." in report, report  # the workers counted what Locust saw, by version
