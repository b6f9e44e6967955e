"""A bounded chaos run, as CI runs it: every fault kind once under Locust load, nothing lost, nothing wrong.

About 60 s of load on a local cluster of three workers (each behind a cable
that can be cut): kill -9 and restart, pause and resume, cut and restore,
drain and replace, and a restart of Redis under the tasks in flight, in a
seeded order. Then the report's figures, and the evidence that each fault
really happened.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # a bounded chaos run: a cluster and Locust

KINDS = {"kill9", "pause", "cut", "drain", "redis"}


@pytest.fixture(scope="module")
def chaos_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("chaos")
    done = subprocess.run(
        [sys.executable, "-m", "mrtr_ops.chaos", "--duration", "60", "--seed", "11", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done, out


@pytest.fixture(scope="module")
def summary(chaos_run: tuple[subprocess.CompletedProcess[str], Path]) -> dict[str, Any]:
    done, out = chaos_run
    assert (out / "summary.json").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    report: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return report


def _fault(summary: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(row for row in summary["faults"] if row["kind"] == kind)


def test_the_run_passes_with_no_failure_and_no_wrong_answer(
    chaos_run: tuple[subprocess.CompletedProcess[str], Path], summary: dict[str, Any]
) -> None:
    done, _ = chaos_run
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    assert summary["problems"] == []
    assert summary["requests"] > 100
    assert summary["failures"] == 0
    assert summary["wrong_answers"] == 0
    assert summary["reasked_questions"] == 0
    assert set(summary["fault_kinds_done"]) == KINDS
    assert all(row["error"] is None for row in summary["faults"])


def test_the_faults_cost_retries_within_the_budget_and_work_was_handed_back(summary: dict[str, Any]) -> None:
    assert summary["retried_requests"] > 0, "faults under load must have cost some retries"
    assert 0 < summary["max_consecutive_retries"] <= summary["retry_budget"]
    assert summary["hand_backs"]["total"] > 0
    assert summary["hand_backs"]["total"] == sum(v for k, v in summary["hand_backs"].items() if k != "total")


def test_the_killed_process_is_gone_and_a_new_one_serves(summary: dict[str, Any]) -> None:
    kill = _fault(summary, "kill9")
    evidence = kill["evidence"]
    assert evidence["old_pid_gone"]
    assert evidence["new_pid"] not in (None, evidence["old_pid"])
    assert evidence["served_after_restart"] > 0
    assert kill["out_of_rotation_after_s"] is not None
    assert kill["back_in_rotation_after_s"] is not None


def test_the_paused_workers_requests_were_retried_elsewhere(summary: dict[str, Any]) -> None:
    pause = _fault(summary, "pause")
    assert pause["evidence"]["same_process"], "resumed, not replaced"
    assert pause["out_of_rotation_after_s"] is not None
    assert pause["lb_errors"]["unresponsive"] >= 1, "the proxy gave up on requests the paused worker held"
    assert pause["retried_elsewhere"] >= 1
    assert pause["failed_in_window"] == 0


def test_the_worker_cut_off_ran_on_and_came_back(summary: dict[str, Any]) -> None:
    cut = _fault(summary, "cut")
    assert cut["evidence"]["ran_on"]
    assert cut["evidence"]["same_process"]
    assert cut["out_of_rotation_after_s"] is not None
    assert cut["back_in_rotation_after_s"] is not None
    assert cut["failed_in_window"] == 0


def test_the_drained_worker_exited_and_a_replacement_joined(summary: dict[str, Any]) -> None:
    drain = _fault(summary, "drain")
    assert drain["evidence"]["exited"]
    assert drain["evidence"]["replacement"] not in (None, drain["victim"])


def test_tasks_ran_through_the_faults_none_wrong_none_lost_some_resumed_elsewhere(summary: dict[str, Any]) -> None:
    assert summary["tasks_created"] > 0, "the load includes tasks in flight"
    assert summary["tasks_wrong"] == 0
    assert summary["tasks_lost"] == 0
    assert summary["tasks_completed"] == summary["tasks_created"]
    assert summary["tasks_resumed_elsewhere"] > 0, "a task's slices ran on more than one instance"


def test_the_figures_are_in_the_report(
    chaos_run: tuple[subprocess.CompletedProcess[str], Path], summary: dict[str, Any]
) -> None:
    _, out = chaos_run
    text = (out / "summary.md").read_text()
    assert f"| requests | {summary['requests']} |" in text
    assert "| failures within the retry budget | 0 |" in text
    assert "| wrong answers | 0 |" in text
    assert f"| tasks created | {summary['tasks_created']} |" in text
    assert "| tasks lost (failed, or never completed or cancelled) | 0 |" in text
    assert f"| tasks whose slices ran on more than one instance | {summary['tasks_resumed_elsewhere']} |" in text
    assert f"hand-backs (worker metrics) | {summary['hand_backs']['total']}:" in text
    for row in summary["faults"]:
        assert f"| {row['kind']} | {row['victim']} |" in text
    assert (out / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "plan.json").read_text())


def test_redis_restarted_under_the_tasks_in_flight_and_none_was_lost(summary: dict[str, Any]) -> None:
    redis = _fault(summary, "redis")
    evidence = redis["evidence"]
    assert evidence["old_pid_gone"]
    assert evidence["new_pid"] not in (None, evidence["old_pid"])
    assert redis["recovered_at_s"] is not None, "every worker saw the task store again"
    assert summary["tasks_created"] > 0
    assert summary["tasks_lost"] == 0
