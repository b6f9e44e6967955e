"""The queue rule of `SheddingPolicy`: a prioritized request queued too long moves on, within its budget of moves.

Pure decisions, no processes. The rule is off by default; `QUEUE` waits 1000 ms,
with the default 3 moves per request (shared with straggler moves), priority after 4 hops.
"""

from __future__ import annotations

import pytest

from mrtr_protocol.rounds import EndOfRound
from mrtr_worker.compute.policy import Boundary, Run, SheddingPolicy, SheddingSettings, Wait
from mrtr_worker.sealing.layout import Pace, Trace
from tests.worker.compute.decisions import arrive

DEFAULT = SheddingPolicy(SheddingSettings())
PRIORITIZED = 4
"""Hand-backs after which a request queues for a slot instead of being refused (the default)."""
QUEUE = SheddingPolicy(SheddingSettings(queue_wait_ms=1000))
OFF = SheddingPolicy(SheddingSettings(enabled=False, queue_wait_ms=1000))


@pytest.mark.parametrize(
    ("policy", "pace", "wait"),
    [
        (QUEUE, None, 1.0),  # never measured, never moved
        (QUEUE, Pace(10.0, 2), 1.0),
        (QUEUE, Pace(10.0, 2, moves=2), 1.0),  # one move left
        (QUEUE, Pace(10.0, 2, moves=3), None),  # budget spent (straggler moves count too): waits for its slot
        (QUEUE, Pace(0.0, 0, moves=3), None),  # three queue moves, nothing measured
        (SheddingPolicy(SheddingSettings(queue_wait_ms=250)), None, 0.25),
        (SheddingPolicy(SheddingSettings(queue_wait_ms=1000, straggler_budget=0)), None, None),
        (DEFAULT, None, None),  # off by default: a queued request waits for its slot
        (OFF, None, None),  # stay where you land: a queued call waits, whatever happens elsewhere
    ],
)
def test_queue_wait(policy: SheddingPolicy, pace: Pace | None, wait: float | None) -> None:
    decision = arrive(policy, pace, hops=PRIORITIZED, full=True)
    assert isinstance(decision, Wait)
    assert decision.patience_s == wait


@pytest.mark.parametrize(
    ("policy", "pace", "may"),
    [
        (DEFAULT, None, True),  # a rebalance moves it (the timer is off by default)
        (DEFAULT, Pace(10.0, 2, moves=2), True),
        (DEFAULT, Pace(10.0, 2, moves=3), False),  # no move left: it keeps its place (round cap, no starvation)
        (SheddingPolicy(SheddingSettings(straggler_budget=0)), None, False),
        (SheddingPolicy(SheddingSettings(enabled=False)), None, False),  # stay where you land
    ],
)
def test_who_may_leave_a_queue(policy: SheddingPolicy, pace: Pace | None, may: bool) -> None:
    decision = arrive(policy, pace, hops=PRIORITIZED, full=True)
    assert isinstance(decision, Wait)
    assert (decision.leave is not None) is may


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (None, Pace(0.0, 0, moves=1)),
        (Pace(10.0, 2), Pace(10.0, 2, moves=1)),
        (Pace(10.0, 2, moves=2, fled="w1"), Pace(10.0, 2, moves=3, fled="w1")),  # rate and mark untouched
    ],
)
def test_leaving_a_queue_is_a_move(before: Pace | None, after: Pace) -> None:
    assert _left(before) == after


def test_leaving_a_queue_does_not_age_a_request() -> None:
    trace = Trace(hops=4)
    assert isinstance(arrive(DEFAULT, hops=trace.fair_hops, full=True), Wait)  # prioritized: it queues
    trace.hops += 1  # the hand-back is a round
    trace.pace = _left(trace.pace)
    assert trace.fair_hops == 4
    assert isinstance(arrive(DEFAULT, trace.pace, hops=trace.fair_hops, full=True), Wait)


def test_a_pace_from_a_queue_alone_never_makes_a_straggler() -> None:
    # Nothing measured yet: no reference rate to be slow against.
    moved = _left(None)
    at = Boundary(slice_ms=5000, hops=5, waiting=0, draining=False, steps=1, pace=moved)
    assert DEFAULT.at_step_end(at) is None  # not a straggler; prioritized: runs on
    # Its first measured slice becomes the reference; the move stays counted.
    assert SheddingPolicy.measured(moved, 10, 1000, EndOfRound.SLICE) == Pace(10.0, 1, moves=1)


def test_queue_moves_and_straggler_moves_share_one_budget() -> None:
    """What a client's round cap must allow stays priority_after_hops + budget + 1 whatever the mix of moves."""
    s = QUEUE.settings
    pace: Pace | None = None
    rounds = s.priority_after_hops  # aged by admission into priority
    for _ in range(10):  # every instance it lands on has a long queue
        decision = arrive(QUEUE, pace, hops=rounds, full=True)
        assert isinstance(decision, Wait)
        if decision.leave is None:
            break
        pace = decision.leave.pace
        rounds += 1
    assert pace is not None
    assert pace.moves == s.straggler_budget
    back_on_the_straggler = arrive(QUEUE, Pace(10.0, 1, moves=pace.moves, fled="w1"), hops=rounds, here="w1")
    assert back_on_the_straggler == Run()  # no straggler move left either
    assert rounds + 1 <= s.priority_after_hops + s.straggler_budget + 1


def _left(pace: Pace | None) -> Pace | None:
    """The pace a request carries on after a rebalance takes it out of a queue (`Wait.leave`)."""
    decision = arrive(DEFAULT, pace, hops=PRIORITIZED, here="w-queued", full=True)
    assert isinstance(decision, Wait)
    assert decision.leave is not None
    return decision.leave.pace
