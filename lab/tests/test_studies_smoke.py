"""The lab's studies must keep running end to end, as `scripts/bench` runs them; their figures are never asserted.

Each runs as a subprocess with a tiny duration and `--no-report`, so a test run leaves the docs alone; all
start at once, since most of their time is process start-up. Run with the lab's tests (`scripts/bench lab-tests`),
not in the product's CI.
"""

from __future__ import annotations

import re

import pytest

from benchmarks._smoke import run_tiny

SMOKE = {
    "straggler": ["--quick", "--duration", "2", "--callers", "2", "--limit", "10000000", "--trace", "2"],
    # one cluster (its workers stepping aside when slow), one slow cell, its slowest call traced hop by hop
    "balance": [
        *("--duration", "2", "--repeats", "1", "--balances", "round_robin+step_aside", "--scenarios", "a"),
        *("--limit", "10000000", "--trace", "1"),
    ],
    # one cluster stepping aside, its three workers paused often and briefly (SIGSTOP/SIGCONT)
    "pauses": [
        *("--duration", "2", "--repeats", "1", "--balances", "round_robin+step_aside", "--limit", "10000000"),
        *("--every", "0.5", "--length", "0.3"),
    ],
}


@pytest.fixture(scope="module")
def outputs() -> dict[str, tuple[int, str]]:
    return run_tiny("mrtr_lab", SMOKE)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SMOKE))
def test_study_runs_and_prints_a_table(outputs: dict[str, tuple[int, str]], name: str) -> None:
    returncode, output = outputs[name]
    assert returncode == 0, output
    assert "|---" in output, output
    assert "written to" not in output


@pytest.mark.slow
def test_straggler_benchmark_traces_the_slowest_calls(outputs: dict[str, tuple[int, str]]) -> None:
    _, output = outputs["straggler"]
    assert "the 2 slowest calls (instance:reason:ms per hop)" in output, output
    assert ":complete:" in output, output  # every call ends with its complete exchange


@pytest.mark.slow
def test_balance_benchmark_traces_the_slowest_call_of_its_cell(outputs: dict[str, tuple[int, str]]) -> None:
    _, output = outputs["balance"]
    assert "(a) checkpoint shedding: the 1 slowest calls" in output, output
    assert re.search(r"^  +[\d.]+ s, started at +[\d.]+ s: .*:complete:\d+$", output, re.M), output
    assert "all healthy" not in output, output  # only the cell asked for ran


@pytest.mark.slow
def test_pause_benchmark_pauses_its_workers(outputs: dict[str, tuple[int, str]]) -> None:
    _, output = outputs["pauses"]
    assert "| each pauses 0.3 s about every 0.5 s | `round_robin+step_aside` |" in output, output
    stopped = re.search(r"The workers were stopped (\d+)% to (\d+)% of the time", output)
    assert stopped, output
    assert int(stopped.group(2)) > 0, output
    assert "0 / 0 |" in output, output  # no wrong answer, no error, for all the pauses
