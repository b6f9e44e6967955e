"""The pause benchmark's pauses (`mrtr_lab._pauses`): their schedule, and real processes stopped and resumed."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks._cluster import _children
from mrtr_lab._pauses import Pauses, schedule
from mrtr_ops.waiting import wait_until


def test_the_schedule_is_seeded_ordered_and_leaves_each_pause_its_length() -> None:
    plan = schedule(3, every=2.0, length=0.5, until=60.0, seed=7)
    assert plan == schedule(3, every=2.0, length=0.5, until=60.0, seed=7)
    assert plan != schedule(3, every=2.0, length=0.5, until=60.0, seed=8)
    assert plan == sorted(plan)
    assert all(0 <= at < 60.0 for at, _ in plan)
    for worker in range(3):
        starts = [at for at, w in plan if w == worker]
        assert 10 < len(starts) < 60  # about 60 / 2.5 each
        assert all(later - earlier >= 0.5 for earlier, later in itertools.pairwise(starts))


def _stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (state T in /proc)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


@pytest.fixture
def parent_and_child() -> Iterator[tuple[int, int]]:
    """A process with a child, as a worker with its step process."""
    shell = subprocess.Popen(["sh", "-c", "sleep 60 & wait"])
    try:
        child = wait_until(lambda: _children(shell.pid), timeout=10, what="the shell's child")[0]
        yield shell.pid, child
    finally:
        shell.kill()
        shell.wait()


def test_a_pause_stops_the_process_and_its_children_then_resumes_them(parent_and_child: tuple[int, int]) -> None:
    parent, child = parent_and_child
    assert schedule(1, every=0.01, length=2.0, until=0.05, seed=1)  # this seed pauses at once
    # 2 s: long enough that a busy machine's test thread, polling every 50 ms, still sees the pause
    with Pauses([parent], every=0.01, length=2.0, until=0.05, seed=1) as pauses:
        wait_until(lambda: _stopped(parent) and _stopped(child), timeout=10, what="both stopped")
        wait_until(lambda: not _stopped(parent) and not _stopped(child), timeout=10, what="both resumed")
    assert pauses.stopped >= 1
    assert pauses.stopped_seconds > 0


def test_leaving_resumes_a_process_in_the_middle_of_its_pause(parent_and_child: tuple[int, int]) -> None:
    parent, child = parent_and_child
    with Pauses([parent], every=0.01, length=600, until=0.05, seed=1) as pauses:
        wait_until(lambda: _stopped(parent), timeout=10, what="stopped")
    assert not _stopped(parent)
    assert not _stopped(child)
    assert pauses.stopped == 1


@pytest.mark.parametrize("flags", [["--every", "0"], ["--length", "-1"], ["--balances", "round_robin,nope"]])
def test_the_benchmark_refuses_bad_flags_before_any_cluster_starts(flags: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mrtr_lab.pauses", *flags, "--no-report"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "error:" in done.stderr
    assert "Traceback" not in done.stderr
