"""A bounded task chaos mix, as CI runs it: tasks under kills, zombies, a Redis restart and toxic tasks, checked.

`scripts/chaos --tasks` on a local cluster of three workers and one Redis, at rates below docket's
for the workers (a restart takes seconds on a shared two-core machine, and the mix never strikes
the last worker standing) and with each fault kind done at least once early (`--ensure`). Then the
checker's verdict: no acknowledged task lost, none with two terminal states or two terminal
commits, no step range committed twice, no wrong answer, no loop, every toxic task failed with its
own error, and the faults really happened.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # a cluster, two producer processes and the fault mix

TASKS = 60
ENSURED = ("worker-stop", "worker-kill", "redis-restart", "toxic")


@pytest.fixture(scope="module")
def mix_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = tmp_path_factory.mktemp("chaos-tasks")
    argv = [
        sys.executable, "-m", "mrtr_ops.chaos", "--tasks", str(TASKS), "--workers", "3", "--concurrency", "6",
        "--seed", "11", "--deadline", "900", "--out", str(out),
        "--rate", "worker-kill=0.02", "--rate", "worker-stop=0.02", "--rate", "toxic=0.03",
        *[arg for kind in ENSURED for arg in ("--ensure", kind)],
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1500)
    summary_file = out / "summary.json"
    assert summary_file.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    summary: dict[str, Any] = json.loads(summary_file.read_text())
    return done, summary


def test_the_mix_ends_with_nothing_lost_duplicated_committed_twice_or_wrong(
    mix_run: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    done, summary = mix_run
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    assert summary["problems"] == []
    assert summary["created"] >= TASKS  # the producers' tasks, and the driver's toxic ones
    assert summary["lost"] == 0
    assert summary["terminal_disagreements"] == 0
    assert summary["terminal_commits_not_one"] == 0
    assert summary["committed_twice"] == 0
    assert summary["wrong"] == 0
    assert summary["loops"] == 0
    assert summary["exact"] == summary["completed"] > 0


def test_every_fault_kind_happened_and_left_its_mark(
    mix_run: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    _, summary = mix_run
    for kind in ENSURED:
        assert summary["faults"].get(kind, 0) >= 1, kind
    assert summary["fault_errors"] == []
    assert summary["toxic"] >= 1  # each failed with its own error (else `wrong` above)
    assert summary["taken_over"] >= 1  # a killed or frozen worker's slice moved on
    assert sum(figures["count"] for figures in summary["redelivery"].values()) >= 1  # and it was timed


def test_mrtr_calls_ran_in_the_same_run_and_none_was_wrong(
    mix_run: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    _, summary = mix_run
    assert summary["mrtr_calls"] > 0
    assert summary["mrtr_wrong"] == 0
