"""A short walkthrough, as CI runs it: the rolling upgrade under Locust load, and the report's figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a short walkthrough: a cluster and Locust


def test_a_short_walkthrough_loses_nothing_and_crosses_versions(tmp_path: Path) -> None:
    out = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, "-m", "mrtr_ops.walkthrough", "--duration", "60", "--out", str(out), "--users", "6"],
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
