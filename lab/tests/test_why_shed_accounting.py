"""The figures `why_shed.py` stands on: lost work, when new instances carry their share, the longest call left."""

from __future__ import annotations

import pytest

from mrtr_lab._why_shed.accounting import Sample, final_steps, longest_in_flight, lost_steps, seconds_to_share


def test_a_checkpointed_run_loses_nothing_and_a_restart_loses_what_ran_before() -> None:
    assert lost_steps(executed=40, completed_calls=2, steps_per_call=20) == 0
    # the second call was killed after 15 steps and ran all 20 again
    assert lost_steps(executed=55, completed_calls=2, steps_per_call=20) == 15


def test_a_departed_instance_keeps_its_last_reading() -> None:
    samples = [Sample(0.0, {"w1": 3, "w2": 4}), Sample(1.0, {"w2": 9})]
    assert final_steps(samples) == {"w1": 3, "w2": 9}


def _ramp(new_share_from: float, until: float = 6.0) -> list[Sample]:
    """Two old instances at 10 steps/s each; from `new_share_from` two new ones at 10 steps/s each."""
    samples = []
    for tenth in range(int(until * 4) + 1):
        at = tenth / 4
        new = max(0.0, at - new_share_from) * 10
        samples.append(Sample(at, {"w1": at * 10, "w2": at * 10, "w3": new, "w4": new}))
    return samples


def test_new_instances_carry_their_share_once_a_whole_window_shows_it() -> None:
    seconds = seconds_to_share(_ramp(2.0), {"w3", "w4"}, added_at=1.0, fair_share=0.5)
    assert seconds is not None
    # they start at 2 s; a window of 1 s must hold mostly their work: 45 % of all steps
    assert 2.0 <= 1.0 + seconds <= 3.0


def test_new_instances_that_never_run_never_carry_their_share() -> None:
    assert seconds_to_share(_ramp(100.0), {"w3", "w4"}, added_at=1.0, fair_share=0.5) is None


def test_an_old_instance_a_scrape_missed_does_not_count_as_a_window_of_work() -> None:
    samples = [Sample(0.0, {"w1": 100.0}), Sample(1.0, {"w1": 110.0, "w2": 250.0, "w3": 10.0})]
    # w2 (old) was missed by the first scrape: its 250 steps are not one window's work; w3 (new) ran half
    assert seconds_to_share(samples, {"w3"}, added_at=0.5, fair_share=0.5) == 0.5


@pytest.mark.parametrize(
    ("moment", "expected"),
    [(0.0, 10.0), (5.0, 5.0), (12.0, 0.0), (-1.0, 0.0)],
)
def test_longest_in_flight_is_the_time_the_longest_open_call_still_had(moment: float, expected: float) -> None:
    calls = [(0.0, 10.0), (1.0, 2.0)]
    assert longest_in_flight(calls, moment) == expected
