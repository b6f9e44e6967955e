"""SheddingPolicy decisions as boundary tables: no processes, no network.

Defaults under test: min slice 200 ms, max slice 2000 ms, priority after 4 hops,
retry hint 25 ms doubling per hop up to 500 ms.
"""

from __future__ import annotations

import pytest

from mrtr_protocol.rounds import EndOfRound
from mrtr_worker.compute.policy import (
    Boundary,
    Busy,
    Decision,
    HandBack,
    Run,
    SheddingPolicy,
    SheddingSettings,
    Wait,
)
from mrtr_worker.sealing.layout import Pace
from tests.worker.compute.decisions import arrive, reason_at

DEFAULT = SheddingPolicy(SheddingSettings())
OFF = SheddingPolicy(SheddingSettings(enabled=False))
NO_SLICE = SheddingPolicy(SheddingSettings(max_slice_ms=0))


def boundary(
    slice_ms: float = 0,
    *,
    hops: int = 0,
    waiting: int = 0,
    draining: bool = False,
    steps: int = 0,
    pace: Pace | None = None,
    alone: bool = False,
    pace_here: bool = False,
    reference: float | None = None,
    fleet_full: bool = False,
) -> Boundary:
    return Boundary(
        slice_ms=slice_ms,
        hops=hops,
        waiting=waiting,
        draining=draining,
        steps=steps,
        pace=pace,
        alone=alone,
        pace_here=pace_here,
        reference=reference,
        fleet_full=fleet_full,
    )


@pytest.mark.parametrize(
    ("policy", "hops", "prioritized"),
    [
        (DEFAULT, 0, False),
        (DEFAULT, 3, False),
        (DEFAULT, 4, True),  # exactly priority_after_hops
        (DEFAULT, 50, True),
        (SheddingPolicy(SheddingSettings(priority_after_hops=1)), 0, False),
        (SheddingPolicy(SheddingSettings(priority_after_hops=1)), 1, True),
        (OFF, 0, True),  # shedding off: every call queues for a slot instead of being refused
        (OFF, 3, True),
    ],
)
def test_admission_refuses_only_requests_not_yet_prioritized(
    policy: SheddingPolicy, hops: int, prioritized: bool
) -> None:
    decision = arrive(policy, hops=hops, full=True)
    assert isinstance(decision, Wait if prioritized else HandBack)
    assert prioritized or (isinstance(decision, HandBack) and decision.reason is EndOfRound.ADMISSION)


def test_a_full_instance_queues_a_new_round_when_the_fleet_looks_full() -> None:
    assert isinstance(arrive(DEFAULT, full=True, fleet_full=True), Wait)
    assert isinstance(arrive(DEFAULT, full=True), HandBack)
    assert isinstance(arrive(DEFAULT, full=False, fleet_full=True), Run)
    draining = arrive(DEFAULT, full=True, fleet_full=True, draining=True)
    assert isinstance(draining, HandBack)
    assert draining.reason is EndOfRound.DRAIN


LIMITED = SheddingPolicy(SheddingSettings(refuse_new_after_ms=2000))


@pytest.mark.parametrize(
    ("policy", "fleet_full", "fresh", "expected_wait_ms", "decided"),
    [
        (LIMITED, True, True, 5000, Busy(3000, 5000)),  # told to come back once the queue is within the limit
        (LIMITED, True, True, 2010, Busy(25, 2010)),  # at least the admission hint's base
        (LIMITED, True, True, 2000, "wait"),  # within the limit: it queues
        (LIMITED, True, False, 9000, "wait"),  # steps done for it: a refusal would lose them
        (LIMITED, False, True, 9000, "hand back"),  # the fleet does not look full: refused at admission as ever
        (DEFAULT, True, True, 9000, "wait"),  # no limit by default
    ],
)
def test_a_new_call_is_refused_as_busy_only_while_the_fleet_looks_full_and_the_queue_is_too_long(
    policy: SheddingPolicy, fleet_full: bool, fresh: bool, expected_wait_ms: float, decided: Busy | str
) -> None:
    decision = arrive(policy, full=True, fleet_full=fleet_full, fresh=fresh, expected_wait_ms=expected_wait_ms)
    kinds = {Wait: "wait", HandBack: "hand back"}
    assert decision == decided if isinstance(decided, Busy) else kinds.get(type(decision)) == decided, decision


@pytest.mark.parametrize(
    ("reason", "hops", "retry_after_ms"),
    [
        (EndOfRound.ADMISSION, 0, 25),
        (EndOfRound.ADMISSION, 1, 50),
        (EndOfRound.ADMISSION, 3, 200),
        (EndOfRound.ADMISSION, 4, 400),
        (EndOfRound.ADMISSION, 5, 500),  # 800 capped
        (EndOfRound.ADMISSION, 30, 500),
        # A yield frees the slot for someone else: the client may come back at once.
        (EndOfRound.PRESSURE, 3, 0),
        (EndOfRound.SLICE, 3, 0),
        (EndOfRound.DRAIN, 3, 0),
    ],
)
def test_retry_hint_backs_off_only_after_a_refused_admission(
    reason: EndOfRound, hops: int, retry_after_ms: int
) -> None:
    end: Decision | None
    if reason is EndOfRound.ADMISSION:
        never_prioritized = SheddingPolicy(SheddingSettings(priority_after_hops=100))  # refused at any hop count
        end = arrive(never_prioritized, hops=hops, full=True)
    else:
        at = {
            EndOfRound.PRESSURE: boundary(200, hops=hops, waiting=1),
            EndOfRound.SLICE: boundary(2000, hops=hops),
            EndOfRound.DRAIN: boundary(0, hops=hops, draining=True),
        }[reason]
        end = DEFAULT.at_step_end(at)
    assert isinstance(end, HandBack)
    assert (end.reason, end.retry_after_ms) == (reason, retry_after_ms)


# (policy, boundary, expected reason or None to run the next step)
BOUNDARIES = {
    # nothing to do
    "fresh, idle": (DEFAULT, boundary(0), None),
    # pressure: only once the minimum slice has run
    "pressure before min slice": (DEFAULT, boundary(199.9, waiting=1), None),
    "pressure at min slice": (DEFAULT, boundary(200, waiting=1), EndOfRound.PRESSURE),
    "pressure, many waiting": (DEFAULT, boundary(1500, waiting=3), EndOfRound.PRESSURE),
    "min slice, nobody waiting": (DEFAULT, boundary(200), None),
    "pressure wins over slice": (DEFAULT, boundary(2500, waiting=1), EndOfRound.PRESSURE),
    "pressure with slice off": (NO_SLICE, boundary(200, waiting=1), EndOfRound.PRESSURE),
    # time slice: even on an idle worker
    "just before the slice": (DEFAULT, boundary(1999.9), None),
    "at the slice": (DEFAULT, boundary(2000), EndOfRound.SLICE),
    "past the slice": (DEFAULT, boundary(9000), EndOfRound.SLICE),
    "slice off": (NO_SLICE, boundary(10**7), None),
    # drain: at once, whatever else holds
    "drain at once": (DEFAULT, boundary(0, draining=True), EndOfRound.DRAIN),
    "drain over pressure": (DEFAULT, boundary(500, waiting=2, draining=True), EndOfRound.DRAIN),
    "drain over slice": (DEFAULT, boundary(5000, draining=True), EndOfRound.DRAIN),
    "drain, prioritized": (DEFAULT, boundary(0, hops=4, draining=True), EndOfRound.DRAIN),
    "drain, shedding off": (OFF, boundary(0, draining=True), EndOfRound.DRAIN),
    # fairness: after priority_after_hops hand-backs a request is not shed again (except by a drain)
    "3 hops, pressure": (DEFAULT, boundary(200, hops=3, waiting=1), EndOfRound.PRESSURE),
    "3 hops, slice": (DEFAULT, boundary(2000, hops=3), EndOfRound.SLICE),
    "4 hops, pressure": (DEFAULT, boundary(200, hops=4, waiting=1), None),
    "4 hops, slice": (DEFAULT, boundary(2000, hops=4), None),
    "40 hops, both": (DEFAULT, boundary(10**6, hops=40, waiting=9), None),
    "priority after 1 hop": (SheddingPolicy(SheddingSettings(priority_after_hops=1)), boundary(10**6, hops=1), None),
    # the fleet looks full: a yield would wait at the back of another full queue, so it runs on; a drain still ends it
    "fleet full, pressure": (DEFAULT, boundary(500, waiting=3, fleet_full=True), None),
    "fleet full, slice": (DEFAULT, boundary(9000, fleet_full=True), None),
    "fleet full, drain": (DEFAULT, boundary(0, draining=True, fleet_full=True), EndOfRound.DRAIN),
    # shedding off: no pressure, no slice
    "off, pressure": (OFF, boundary(10**6, waiting=5), None),
    "off, slice": (OFF, boundary(10**6), None),
}


@pytest.mark.parametrize(("policy", "at", "expected"), BOUNDARIES.values(), ids=BOUNDARIES.keys())
def test_boundary(policy: SheddingPolicy, at: Boundary, expected: EndOfRound | None) -> None:
    assert reason_at(policy, at) == expected


def test_custom_slices() -> None:
    policy = SheddingPolicy(SheddingSettings(min_slice_ms=10, max_slice_ms=50))
    assert reason_at(policy, boundary(9, waiting=1)) is None
    assert reason_at(policy, boundary(10, waiting=1)) == EndOfRound.PRESSURE
    assert reason_at(policy, boundary(49)) is None
    assert reason_at(policy, boundary(50)) == EndOfRound.SLICE


# Straggler moves. Defaults: ratio 0.5, measured after 1000 ms, budget 3 moves per request.
SEEN_10 = Pace(rate=10.0, samples=2)
"""A request that ran at 10 steps/s on earlier instances."""
STRAGGLER_OFF = SheddingPolicy(SheddingSettings(straggler_ratio=0))

STRAGGLERS = {
    # 5 steps in 1000 ms is exactly half of 10/s: not below the ratio
    "half the rate": (DEFAULT, boundary(1000, steps=5, pace=SEEN_10), None),
    "under half the rate": (DEFAULT, boundary(1000, steps=4, pace=SEEN_10), EndOfRound.STRAGGLER),
    "a quarter of the rate": (DEFAULT, boundary(1200, steps=3, pace=SEEN_10), EndOfRound.STRAGGLER),
    "faster than before": (DEFAULT, boundary(1000, steps=30, pace=SEEN_10), None),
    # measured slice: too short, or no step finished here yet
    "slow, before the measured slice": (DEFAULT, boundary(999, steps=1, pace=SEEN_10), None),
    "no step here yet": (DEFAULT, boundary(1500, steps=0, pace=SEEN_10), None),
    # nothing to compare with
    "no pace carried": (DEFAULT, boundary(1000, steps=1), None),
    "pace with no sample": (DEFAULT, boundary(1000, steps=1, pace=Pace(rate=0, samples=0)), None),
    # the peers' paces seen here (`reference`) measure a round that brings no pace of its own, or one from here
    "new call, peers at 10/s": (DEFAULT, boundary(1000, steps=4, reference=10.0), EndOfRound.STRAGGLER),
    "new call, peers at 8/s": (DEFAULT, boundary(1000, steps=4, reference=8.0), None),
    "new call, slow before the measured slice": (DEFAULT, boundary(999, steps=1, reference=10.0), None),
    "moved once, nothing measured": (
        DEFAULT,
        boundary(1000, steps=1, pace=Pace(0, 0, moves=1), reference=10.0),
        EndOfRound.STRAGGLER,
    ),
    "new call, budget spent": (DEFAULT, boundary(1000, steps=1, pace=Pace(0, 0, moves=3), reference=10.0), None),
    "pace from here, peers faster": (
        DEFAULT,
        boundary(1000, steps=1, pace=Pace(1.2, 1), pace_here=True, reference=10.0),
        EndOfRound.STRAGGLER,
    ),
    "pace from here, no peers seen": (DEFAULT, boundary(1000, steps=1, pace=Pace(1.2, 1), pace_here=True), None),
    "pace from a peer wins over the reference": (
        DEFAULT,
        boundary(1000, steps=4, pace=Pace(6.0, 2), reference=10.0),
        None,
    ),
    "new call, peers at 10/s, rule off": (STRAGGLER_OFF, boundary(1000, steps=1, reference=10.0), None),
    # budget: three moves per request, then it stays (and ages as usual)
    "one move made": (DEFAULT, boundary(1000, steps=1, pace=Pace(10, 3, moves=1)), EndOfRound.STRAGGLER),
    "budget spent": (DEFAULT, boundary(1000, steps=1, pace=Pace(10, 3, moves=3)), None),
    "budget spent, slice": (DEFAULT, boundary(2000, steps=1, pace=Pace(10, 3, moves=3)), EndOfRound.SLICE),
    # priority pins a request against shedding, not to a straggler
    "prioritized, slow": (DEFAULT, boundary(1000, hops=4, steps=1, pace=SEEN_10), EndOfRound.STRAGGLER),
    "prioritized, budget spent": (DEFAULT, boundary(1000, hops=9, steps=1, pace=Pace(10, 3, moves=3)), None),
    # a drain still comes first; straggling comes before pressure (it does not age the request)
    "drain over straggler": (DEFAULT, boundary(1000, steps=1, pace=SEEN_10, draining=True), EndOfRound.DRAIN),
    "straggler over pressure": (DEFAULT, boundary(1000, steps=1, waiting=2, pace=SEEN_10), EndOfRound.STRAGGLER),
    "straggler over slice": (DEFAULT, boundary(2000, steps=1, pace=SEEN_10), EndOfRound.STRAGGLER),
    # off: by its own setting, or with shedding
    "straggler rule off": (STRAGGLER_OFF, boundary(1000, steps=1, pace=SEEN_10), None),
    "straggler rule off, slice": (STRAGGLER_OFF, boundary(2000, steps=1, pace=SEEN_10), EndOfRound.SLICE),
    "shedding off": (OFF, boundary(1000, steps=1, pace=SEEN_10), None),
}


@pytest.mark.parametrize(("policy", "at", "expected"), STRAGGLERS.values(), ids=STRAGGLERS.keys())
def test_straggler_boundary(policy: SheddingPolicy, at: Boundary, expected: EndOfRound | None) -> None:
    assert reason_at(policy, at) == expected


def test_a_straggler_move_is_retried_at_once() -> None:
    slow_here = boundary(1000, hops=3, steps=2, pace=Pace(rate=10.0, samples=2))  # 2 steps/s against 10
    assert DEFAULT.at_step_end(slow_here) == HandBack(EndOfRound.STRAGGLER, Pace(10.0, 2, 1, fled=None), 0)


MEASURED = {
    "first slice": (None, 4, 1000, EndOfRound.SLICE, Pace(4.0, 1, 0)),
    "weighted half and half": (Pace(10.0, 1), 2, 1000, EndOfRound.SLICE, Pace(6.0, 2, 0)),
    # a move counts, and the straggler's own rate stays out of the reference
    "a straggler move": (Pace(10.0, 3, 1), 1, 1000, EndOfRound.STRAGGLER, Pace(10.0, 3, 2, fled="w-here")),
    "the fled instance is kept": (Pace(10.0, 3, 1, "w-x"), 4, 1000, EndOfRound.SLICE, Pace(7.0, 4, 1, "w-x")),
    "nothing ran: unchanged": (Pace(10.0, 3, 1), 0, 0, EndOfRound.ADMISSION, Pace(10.0, 3, 1)),
    "nothing ran, no pace": (None, 0, 300, EndOfRound.DRAIN, None),
    "a pace with no sample yet": (Pace(0.0, 0, 1), 3, 1000, EndOfRound.PRESSURE, Pace(3.0, 1, 1)),
}


@pytest.mark.parametrize(("before", "steps", "slice_ms", "reason", "after"), MEASURED.values(), ids=MEASURED.keys())
def test_pace_after_a_round(
    before: Pace | None, steps: int, slice_ms: float, reason: EndOfRound, after: Pace | None
) -> None:
    assert SheddingPolicy.measured(before, steps, slice_ms, reason, "w-here") == after


FLED = {
    "back on the straggler it left": (DEFAULT, Pace(10, 2, 1, fled="w-here"), True),
    "another instance": (DEFAULT, Pace(10, 2, 1, fled="w-other"), False),
    "never fled": (DEFAULT, Pace(10, 2, 0), False),
    "no pace": (DEFAULT, None, False),
    "budget spent": (DEFAULT, Pace(10, 2, 3, fled="w-here"), False),
    "rule off": (STRAGGLER_OFF, Pace(10, 2, 1, fled="w-here"), False),
    "shedding off": (OFF, Pace(10, 2, 1, fled="w-here"), False),
}


@pytest.mark.parametrize(("policy", "pace", "expected"), FLED.values(), ids=FLED.keys())
def test_a_round_back_on_the_straggler_it_left_moves_on_unmeasured(
    policy: SheddingPolicy, pace: Pace | None, expected: bool
) -> None:
    assert policy.fled_here(pace, "w-here") is expected


def journey(
    policy: SheddingPolicy, step_ms: list[float], steps: int, names: list[str] | None = None
) -> list[EndOfRound | None]:
    """A computation of `steps` steps, one round per instance of `step_ms` (cycled): how each round ended.

    Each round runs on an idle instance until the policy yields (None: it completed there); `names`
    (default: all different) lets the round robin bring a request back to the same instance.
    """
    pace: Pace | None = None
    hops = 0
    ends: list[EndOfRound | None] = []
    while steps:
        turn = len(ends) % len(step_ms)
        ms, instance = step_ms[turn], (names or [str(i) for i in range(len(step_ms))])[turn]
        here = 0
        reason = EndOfRound.STRAGGLER if policy.fled_here(pace, instance) else None
        while steps and reason is None:
            fair = hops - (pace.moves if pace is not None else 0)
            reason = reason_at(policy, boundary(here * ms, hops=fair, steps=here, pace=pace))
            if reason is None:
                here, steps = here + 1, steps - 1
        ends.append(reason)
        if reason is None:
            break
        pace = policy.measured(pace, here, here * ms, reason, instance)
        hops += 1
        assert len(ends) < 100, f"bouncing: {ends}"
    return ends


SLICE, STRAGGLER = EndOfRound.SLICE, EndOfRound.STRAGGLER


def test_a_request_fast_everywhere_never_moves_as_a_straggler() -> None:
    # Instances 40 % apart in speed (load, noise): time slices only.
    ends = journey(DEFAULT, [100, 140, 100, 70], steps=200)
    assert STRAGGLER not in ends
    assert ends == [SLICE, SLICE, SLICE, SLICE, None]  # 4 slices age it into priority; then it runs to the end


def test_a_request_leaves_a_quarter_speed_instance_after_one_measured_slice() -> None:
    ends = journey(DEFAULT, [100, 400, 100], steps=60)
    assert ends[:2] == [SLICE, STRAGGLER]  # 2 steps of 400 ms measured, then handed on
    assert ends[-1] is None


def test_a_request_on_slow_instances_only_does_not_bounce_forever() -> None:
    # Measured fast once, then only slow instances: three moves (the budget), then it stays and finishes.
    ends = journey(DEFAULT, [100, 400, 400, 400], steps=200)
    assert ends.count(STRAGGLER) == DEFAULT.settings.straggler_budget
    assert ends[-1] is None
    assert len(ends) <= DEFAULT.settings.straggler_budget + DEFAULT.settings.priority_after_hops + 1


def test_a_request_sent_back_to_the_straggler_it_left_moves_on_at_once() -> None:
    # The round robin brings it back to the slow instance "s" at once: no second measurement there.
    ends = journey(DEFAULT, [100, 400, 400], 200, names=["a", "s", "s"])
    assert ends[:4] == [SLICE, STRAGGLER, STRAGGLER, SLICE]


def test_straggler_moves_do_not_age_a_request_into_priority() -> None:
    # Fast, slow, fast, slow, ...: the two moves leave the four ageing hops intact.
    ends = journey(DEFAULT, [100, 400], steps=400)
    assert ends.count(STRAGGLER) == DEFAULT.settings.straggler_budget
    assert ends.count(SLICE) == DEFAULT.settings.priority_after_hops


@pytest.mark.parametrize("budget", [0, 1, 2, 5])
def test_rounds_a_request_can_take_are_bounded_by_the_budget(budget: int) -> None:
    policy = SheddingPolicy(SheddingSettings(straggler_budget=budget))
    ends = journey(policy, [100, 400], steps=400)
    assert ends.count(STRAGGLER) == min(budget, 4)  # budget 5: done on a fast instance after 4 moves
    # What a client's round cap has to allow at most: the ageing hops plus the straggler budget, then the result.
    assert len(ends) <= policy.settings.priority_after_hops + budget + 1
    assert ends[-1] is None


# Task slices (`task_slice_end`): a 1000 ms slice is measured over 500 ms; no ageing, no round cap.
TASK_SLICE_MS = 1000.0

TASK_SLICES = {
    "fresh": (DEFAULT, boundary(0), None),
    "runs to its slice": (DEFAULT, boundary(999.9, steps=9), None),
    "the slice's end": (DEFAULT, boundary(1000, steps=10), EndOfRound.SLICE),
    "the slice's end, shedding off": (OFF, boundary(1000, steps=10), EndOfRound.SLICE),  # checkpoints regardless
    "drain at once": (DEFAULT, boundary(0, draining=True), EndOfRound.DRAIN),
    "drain over straggler": (DEFAULT, boundary(600, steps=1, pace=SEEN_10, draining=True), EndOfRound.DRAIN),
    # straggler: measured over half the slice
    "slow, before the measured part": (DEFAULT, boundary(499, steps=1, pace=SEEN_10), None),
    "slow, measured": (DEFAULT, boundary(500, steps=2, pace=SEEN_10), EndOfRound.STRAGGLER),
    "exactly half the rate": (DEFAULT, boundary(500, steps=3, pace=Pace(12.0, 2)), None),
    "under half the rate": (DEFAULT, boundary(500, steps=2, pace=Pace(12.0, 2)), EndOfRound.STRAGGLER),
    "as fast as before": (DEFAULT, boundary(500, steps=5, pace=SEEN_10), None),
    "no step here yet": (DEFAULT, boundary(800, steps=0, pace=SEEN_10), None),
    "no pace carried": (DEFAULT, boundary(500, steps=1), None),
    "budget spent: runs to its end": (DEFAULT, boundary(999, steps=1, pace=Pace(10, 3, moves=3)), None),
    "budget spent, the end": (DEFAULT, boundary(1000, steps=1, pace=Pace(10, 3, moves=3)), EndOfRound.SLICE),
    "alone: no move": (DEFAULT, boundary(500, steps=1, pace=SEEN_10, alone=True), None),
    "alone, the end": (DEFAULT, boundary(1000, steps=1, pace=SEEN_10, alone=True), EndOfRound.SLICE),
    "rule off": (STRAGGLER_OFF, boundary(500, steps=1, pace=SEEN_10), None),
    "shedding off": (OFF, boundary(500, steps=1, pace=SEEN_10), None),
    # pressure: a computation queued here for a slot, after the minimum slice; hops never pin a task
    "pressure before min slice": (DEFAULT, boundary(199, waiting=1), None),
    "pressure": (DEFAULT, boundary(200, waiting=1), EndOfRound.PRESSURE),
    "pressure, many hops": (DEFAULT, boundary(200, hops=40, waiting=1), EndOfRound.PRESSURE),
    "pressure, shedding off": (OFF, boundary(200, waiting=1), None),
    "straggler over pressure": (DEFAULT, boundary(500, steps=1, waiting=1, pace=SEEN_10), EndOfRound.STRAGGLER),
}


def test_task_boundaries_default_to_others_being_there() -> None:
    assert Boundary(slice_ms=0, hops=0, waiting=0, draining=False).alone is False


@pytest.mark.parametrize(("policy", "at", "expected"), TASK_SLICES.values(), ids=TASK_SLICES.keys())
def test_task_slice_boundary(policy: SheddingPolicy, at: Boundary, expected: EndOfRound | None) -> None:
    assert policy.task_slice_end(at, TASK_SLICE_MS) == expected


@pytest.mark.parametrize(("slice_ms", "measured"), [(1000, 500), (400, 200), (50, 25), (3000, 1000), (10_000, 1000)])
def test_a_task_slice_is_measured_over_half_its_length_at_most_the_call_window(slice_ms: int, measured: float) -> None:
    assert DEFAULT.task_measure_ms(slice_ms) == measured


def test_a_task_slice_taken_by_the_straggler_it_fled_moves_on_unless_it_is_alone() -> None:
    fled = Pace(10, 2, 1, fled="w-here")
    assert DEFAULT.fled_here(fled, "w-here") is True
    assert DEFAULT.fled_here(fled, "w-here", alone=True) is False
    assert DEFAULT.fled_here(Pace(10, 2, 3, fled="w-here"), "w-here") is False  # budget spent


TASK_MEASURED = {
    "first slice": (None, 4, 1000, EndOfRound.SLICE, Pace(4.0, 1, 0)),
    "a move counts, its rate left out": (Pace(10.0, 3, 1), 1, 500, EndOfRound.STRAGGLER, Pace(10.0, 3, 2, "w-here")),
    "a fled put-back counts": (Pace(10.0, 3, 1, "w-here"), 0, 0, EndOfRound.STRAGGLER, Pace(10.0, 3, 2, "w-here")),
    # the budget bounds moves in a row: a slice that ran resets it
    "a slice elsewhere resets moves": (Pace(10.0, 3, 2, "w-x"), 10, 1000, EndOfRound.SLICE, Pace(10.0, 4, 0, "w-x")),
    "a slice on the fled one clears it": (Pace(10.0, 3, 3, "w-here"), 2, 1000, EndOfRound.SLICE, Pace(6.0, 4, 0)),
    "pressure resets too": (Pace(10.0, 3, 2), 2, 200, EndOfRound.PRESSURE, Pace(10.0, 4, 0)),
    "nothing ran: unchanged": (Pace(10.0, 3, 2, "w-here"), 0, 0, EndOfRound.DRAIN, Pace(10.0, 3, 2, "w-here")),
    "no pace, nothing ran": (None, 0, 0, EndOfRound.DRAIN, None),
}


@pytest.mark.parametrize(
    ("before", "steps", "slice_ms", "reason", "after"), TASK_MEASURED.values(), ids=TASK_MEASURED.keys()
)
def test_task_pace_after_a_slice(
    before: Pace | None, steps: int, slice_ms: float, reason: EndOfRound, after: Pace | None
) -> None:
    assert SheddingPolicy.measured_slice(before, steps, slice_ms, reason, "w-here") == after


def task_journey(
    policy: SheddingPolicy, step_ms: dict[str, float], takers: list[str], steps: int, alone: bool = False
) -> list[tuple[str, EndOfRound | None]]:
    """A task of `steps` steps whose slices are taken by `takers` in turn (cycled): (taker, how the slice ended)."""
    pace: Pace | None = None
    ends: list[tuple[str, EndOfRound | None]] = []
    while steps:
        instance = takers[len(ends) % len(takers)]
        ms, here = step_ms[instance], 0
        reason = EndOfRound.STRAGGLER if policy.fled_here(pace, instance, alone=alone) else None
        while steps and reason is None:
            at = boundary(here * ms, steps=here, pace=pace, alone=alone)
            reason = policy.task_slice_end(at, TASK_SLICE_MS)
            if reason is None:
                here, steps = here + 1, steps - 1
        ends.append((instance, reason))
        pace = policy.measured_slice(pace, here, here * ms, reason, instance)
        assert len(ends) < 1000, f"bouncing: {ends}"
    return ends


SPEEDS = {"fast": 100.0, "slow": 400.0}


def test_a_task_leaves_a_quarter_speed_instance_at_its_measured_boundary() -> None:
    ends = task_journey(DEFAULT, SPEEDS, ["fast", "slow"], steps=40)
    assert ends[:2] == [("fast", SLICE), ("slow", STRAGGLER)]
    assert ("slow", SLICE) not in ends  # every slice the slow one took, it gave up half-way
    assert all(instance == "fast" for instance, end in ends if end is None)


def test_a_task_the_straggler_keeps_taking_moves_at_most_budget_times_in_a_row_then_runs() -> None:
    # The queue hands every slice back to the slow instance: three moves, then a full slice there, and so on.
    ends = task_journey(DEFAULT, SPEEDS, ["fast", "slow", "slow", "slow", "slow", "slow"], steps=30)
    budget = DEFAULT.settings.straggler_budget
    assert ends[1 : 2 + budget] == [("slow", STRAGGLER)] * budget + [("slow", SLICE)]
    run = 0
    for _, end in ends:  # never more than the budget in a row: the task always progresses
        run = run + 1 if end is STRAGGLER else 0
        assert run <= budget
    assert ends[-1][1] is None


def test_a_task_alone_on_one_instance_never_moves() -> None:
    # One worker that slowed down since the last slice: no one to move to, so the slice runs to its end.
    ends = task_journey(DEFAULT, SPEEDS, ["fast", "slow"], steps=40, alone=True)
    assert STRAGGLER not in {end for _, end in ends}


def test_a_task_fast_everywhere_never_moves() -> None:
    ends = task_journey(DEFAULT, {"a": 100.0, "b": 140.0, "c": 70.0}, ["a", "b", "c"], steps=60)
    assert STRAGGLER not in {end for _, end in ends}


SLOW_PACE = Pace(rate=10.0, samples=2)
FLED_W1 = Pace(rate=10.0, samples=2, moves=1, fled="w1")
SPENT = Pace(rate=10.0, samples=2, moves=3, fled="w1")


@pytest.mark.parametrize(
    ("policy", "pace", "draining", "slow", "expected"),
    [
        (DEFAULT, None, False, False, None),
        (DEFAULT, SLOW_PACE, True, True, (EndOfRound.DRAIN, SLOW_PACE)),  # a drain first, the pace untouched
        (OFF, None, True, False, (EndOfRound.DRAIN, None)),  # shedding off: a drain still hands back
        (DEFAULT, FLED_W1, False, False, (EndOfRound.STRAGGLER, Pace(10.0, 2, moves=2, fled="w1"))),
        (DEFAULT, SPENT, False, True, None),  # no moves left: served here, even on a slow instance
        (DEFAULT, SLOW_PACE, False, True, (EndOfRound.STRAGGLER, Pace(10.0, 2, moves=1, fled="w1"))),
        (DEFAULT, None, False, True, (EndOfRound.STRAGGLER, Pace(0.0, 0, moves=1, fled="w1"))),
        (OFF, SLOW_PACE, False, True, None),  # shedding off: no straggler move
    ],
)
def test_a_round_is_handed_back_before_any_slot(
    policy: SheddingPolicy, pace: Pace | None, draining: bool, slow: bool, expected: tuple[EndOfRound, Pace] | None
) -> None:
    decision = arrive(policy, pace, draining=draining, slow=slow, here="w1")
    if expected is None:
        assert decision == Run()
    else:
        assert decision == HandBack(*expected)


@pytest.mark.parametrize(
    ("policy", "hops", "fled", "sheds"),
    [
        (DEFAULT, 0, False, True),
        (DEFAULT, 3, False, True),
        (DEFAULT, 4, False, False),  # aged into priority: it queues
        (DEFAULT, 0, True, False),  # straight from a straggler: it queues
        (OFF, 0, False, False),
    ],
)
def test_a_full_instance_sheds_only_rounds_not_prioritized(
    policy: SheddingPolicy, hops: int, fled: bool, sheds: bool
) -> None:
    pace = Pace(rate=10.0, samples=2, moves=1, fled="w-slow") if fled else None
    decision = arrive(policy, pace, hops=hops, here="w-fast", last="w-slow" if fled else None, full=True)
    assert isinstance(decision, HandBack) is sheds
