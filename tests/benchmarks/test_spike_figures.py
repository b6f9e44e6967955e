"""The spike benchmark's arithmetic on records made by hand: arrivals, goodput, settling, lost work."""

from __future__ import annotations

import math

import pytest

from benchmarks._load import Sent
from benchmarks._spike_figures import Sample, p999, phase_figures, settle_time
from benchmarks._spike_load import MEAN_STEPS, LongCall, Phase, schedule_times

PHASES = [Phase("steady", 0.5, 2.0), Phase("spike", 2.0, 2.0), Phase("after", 0.5, 2.0)]


def test_arrivals_follow_each_phases_demand_in_calls_per_second() -> None:
    capacity = MEAN_STEPS * 10  # ten calls' worth of steps per second
    arrivals = schedule_times(PHASES, capacity, started=100.0)
    per_phase = [sum(1 for _, phase in arrivals if phase == n) for n in range(3)]
    assert per_phase == [10, 40, 10]
    assert arrivals[0] == (100.0, 0)
    assert all(100.0 <= at < 106.0 for at, _ in arrivals)


def test_settling_is_counted_from_the_step_to_the_end_of_the_first_calm_second() -> None:
    p99s = [5.0, 5.0, 50.0, 40.0, 9.0, 5.0]
    assert settle_time(p99s, step_at=2, threshold=10.0) == 3.0
    assert settle_time(p99s, step_at=0, threshold=10.0) == 1.0
    assert settle_time([50.0, math.nan], step_at=0, threshold=10.0) is None


def test_p999_interpolates_between_the_closest_ranks() -> None:
    assert p999(list(range(1001))) == pytest.approx(999.0)
    assert math.isnan(p999([]))


def test_phase_figures_count_goodput_settling_and_lost_work() -> None:
    started = 0.0
    capacity = 100.0
    samples = [Sample(float(t), steps) for t, steps in enumerate([0, 50, 100, 200, 300, 350, 400])]
    short = [Sent(t / 10, 100.0 if 2.0 <= t / 10 < 3.0 else 5.0, True) for t in range(60)]
    long = [
        LongCall(0.5, 3.0, 0, "complete", 1),
        LongCall(2.1, 9.0, 1, "complete", 4),
        LongCall(2.2, 9.0, 1, "complete", 2),
        LongCall(2.3, 62.3, 1, "timeout", 0),
        LongCall(2.4, 3.0, 1, "refused", 0, retry_hint=True),
        LongCall(2.5, 9.0, 1, "complete", 30, task=True),  # its requests are polls: not in requests/call
        LongCall(4.5, 5.0, 2, "wrong", 1),
    ]
    steady, spike, after = phase_figures(PHASES, started, capacity, samples, short, long)
    assert steady.goodput == pytest.approx(0.5)
    assert spike.goodput == pytest.approx(1.0)
    assert spike.p99 == pytest.approx(100.0)
    assert (spike.settle_up_s, spike.settle_down_s) == (2.0, 1.0)
    assert (spike.arrived, spike.completed, spike.refused, spike.refused_with_hint) == (5, 3, 1, 1)
    assert (spike.tasks_arrived, spike.tasks_completed) == (1, 1)
    assert spike.requests_per_call == pytest.approx(3.0)
    assert (spike.lost, spike.wrong) == (1, 0)
    assert (after.lost, after.wrong) == (1, 1)
    assert steady.settle_up_s is None
