"""The expected queue wait a busy refusal is judged by: queued rounds shared over the slots, each held as lately."""

from __future__ import annotations

import pytest

from mrtr_worker.compute.queue_estimate import HOLD_WEIGHT, QueueEstimate


def test_nothing_is_known_before_a_round_has_held_a_slot() -> None:
    assert QueueEstimate(2).wait_ms(10) == 0.0


@pytest.mark.parametrize(
    ("capacity", "queued", "expected_ms"), [(1, 0, 2000), (1, 3, 8000), (2, 0, 1000), (2, 5, 6000)]
)
def test_the_nth_queued_round_waits_for_n_plus_one_releases(capacity: int, queued: int, expected_ms: float) -> None:
    estimate = QueueEstimate(capacity)
    estimate.held(2.0)
    assert estimate.wait_ms(queued) == pytest.approx(expected_ms)


def test_one_long_round_moves_the_mean_hold_by_its_weight_only() -> None:
    estimate = QueueEstimate(1)
    estimate.held(1.0)
    estimate.held(11.0)
    assert estimate.wait_ms(0) == pytest.approx((1.0 + HOLD_WEIGHT * 10.0) * 1000)
