"""The user's benchmarks must keep running end to end; their figures are never asserted.

The lab's studies have their own smoke beside their tests (lab/tests/test_studies_smoke.py).

Each runs as `scripts/bench` runs it, as a subprocess, with a tiny duration
and `--no-report`, so a test run leaves the docs alone. Both start at once:
most of their time is process start-up, which overlaps well.
"""

from __future__ import annotations

import pytest

from benchmarks._smoke import run_tiny

SMOKE = {
    # three clusters (one per schedule): one worker each, not two; duration 0 is exactly one measured round
    "hop_cost": ["--duration", "0", "--workers", "1"],
    # two rounds, not six: both cell orders (the odd rounds reverse it), at a third of the time (the run's long pole)
    "proxy": ["--duration", "0.2", "--no-install", "--rounds", "2"],
    "tasks": [
        *("--duration", "0.3", "--warmup", "0", "--latency", "0.5", "--callers", "2", "--limit", "5000000"),
        *("--recoveries", "1", "--lease-ms", "1000", "--slice-ms", "250"),
    ],
    # one failover (kill -9 of the primary) under both modes; Sentinel's fastest sensible detection
    "failover": [
        *("--failovers", "1", "--duration", "2", "--writers", "1", "--limit", "2000000"),
        "--down-after-ms",
        "1000",
    ],
    # under a minute: a few seconds of capacity, 18 s of soak in three 6 s windows, tasks expiring after 5 s
    # (the fixture's long pole: 30 s of soak made it 15 s longer)
    # the default and the fleet-full rule over a schedule of a tenth (under 10 s each)
    "spike": [*("--scale", "0.1", "--duration", "2", "--rate", "20", "--setups", "default,fleet-full rule")],
    "soak": [
        *("--duration", "5", "--minutes", "0.3", "--window", "6", "--sample", "1", "--ttl", "5", "--callers", "4")
    ],
}


@pytest.fixture(scope="module")
def outputs() -> dict[str, tuple[int, str]]:
    return run_tiny("benchmarks", SMOKE)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SMOKE))
def test_benchmark_runs_and_prints_a_table(outputs: dict[str, tuple[int, str]], name: str) -> None:
    returncode, output = outputs[name]
    assert returncode == 0, output
    assert "|---" in output, output
    assert "written to" not in output


@pytest.mark.slow
def test_tasks_benchmark_reports_every_figure(outputs: dict[str, tuple[int, str]]) -> None:
    _, output = outputs["tasks"]
    for figure in ("| task creation (`tools/call`) |", "| `tasks/get` |", "Tasks / MRTR calls (useful steps/s):"):
        assert figure in output, output
    assert "per write on average" in output, output  # the workers' checkpoint histogram was read
    assert "| 1 | w" in output, output  # one recovery trial measured


@pytest.mark.slow
def test_spike_benchmark_reports_every_phase_and_the_targets(outputs: dict[str, tuple[int, str]]) -> None:
    _, output = outputs["spike"]
    for phase in ("| default | steady |", "| default | spike 1.4x |", "| fleet-full rule | spike 3x |"):
        assert phase in output, output
    assert "| spike 3x: goodput |" in output, output


@pytest.mark.slow
def test_proxy_benchmark_says_where_its_system_calls_go(outputs: dict[str, tuple[int, str]]) -> None:
    _, output = outputs["proxy"]
    assert "System calls per request" in output, output  # counted, or why not (no strace, no ptrace)
