"""`Lifecycle.rebalance`: each call tells the calls queued until then, and only them."""

from __future__ import annotations

from mrtr_worker.lifecycle import Lifecycle


def test_a_rebalance_sets_the_event_queued_calls_wait_on_and_arms_a_fresh_one() -> None:
    lifecycle = Lifecycle()
    before = lifecycle.rebalanced
    assert not before.is_set()
    lifecycle.rebalance()
    assert before.is_set()
    assert lifecycle.rebalanced is not before
    assert not lifecycle.rebalanced.is_set()  # a call queued from now on waits for the next one
    assert lifecycle.ready  # a rebalance is not a drain
