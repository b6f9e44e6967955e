"""The task-side straggler decisions (`tasks.straggling`): when a worker believes it is slow, and how long it
leaves the queue's slices to its peers. Tables, no processes; the runner's wiring is in test_tasks_straggler.py."""

from __future__ import annotations

import pytest

from mrtr_worker.tasks.straggling import (
    STANDING_MIN_SAMPLES,
    STANDING_STALE_SECONDS,
    Standing,
    judge_slice,
    pull_wait_ms,
)

JOB = "count_primes"
SLICE_MS = 1000.0


def _standing(*rates: float, job: str = JOB, at: float = 100.0) -> Standing:
    """A standing that measured `rates` (steps/s, one slice each, oldest first), the last at `at`."""
    standing = Standing()
    for rate in rates:
        standing.observe(job, int(rate * 10), 10_000, at)
    return standing


@pytest.mark.parametrize(
    ("mine", "peers", "ratio", "slow"),
    [
        ((1.0, 1.0), [{JOB: 4.0}, {JOB: 4.0}], 0.5, True),  # a quarter of its peers
        ((2.0, 2.0), [{JOB: 4.0}], 0.5, False),  # exactly the ratio: not under it
        ((1.9, 1.9), [{JOB: 4.0}], 0.5, True),
        ((3.0, 3.0), [{JOB: 4.0}, {JOB: 4.0}], 0.5, False),  # a little slower is noise, not a straggler
        ((1.0, 1.0), [{JOB: 4.0}, {JOB: 1.0}], 0.5, True),  # median of 1 and 4 is 2.5
        ((1.0, 1.0), [{JOB: 4.0}, {JOB: 1.0}, {JOB: 1.0}], 0.5, False),  # the median peer is as slow
        ((1.0, 1.0), [{JOB: 4.0}], 0.0, False),  # ratio 0: the rule is off
        ((1.0, 1.0), [], 0.5, False),  # no peers: nothing to be slower than
        ((1.0, 1.0), [{}, {}], 0.5, False),  # peers that measured nothing yet
        ((1.0, 1.0), [{"hash_chain": 400.0}], 0.5, False),  # another job's steps cost something else
        ((1.0,), [{JOB: 4.0}], 0.5, False),  # one slice is not enough to believe it
    ],
)
def test_slow_against_the_peers_median_rate_of_the_same_job(
    mine: tuple[float, ...], peers: list[dict[str, float]], ratio: float, slow: bool
) -> None:
    assert _standing(*mine).slow(peers, ratio, now=100.0) is slow


def test_the_standing_weighs_its_newest_slice_by_half() -> None:
    standing = _standing(4.0, 1.0)
    assert standing.current(100.0) == {JOB: pytest.approx(2.5)}
    assert _standing(4.0, 1.0, 1.0).current(100.0) == {JOB: pytest.approx(1.75)}


def test_a_slice_that_ran_nothing_measures_nothing() -> None:
    standing = _standing(1.0, 1.0)
    standing.observe(JOB, 0, 1000, 100.0)
    standing.observe(JOB, 3, 0, 100.0)
    assert standing.current(100.0) == {JOB: pytest.approx(1.0)}
    assert standing.rates[JOB][1] == STANDING_MIN_SAMPLES


def test_a_stale_standing_is_forgotten_so_a_recovered_worker_pulls_as_usual() -> None:
    standing = _standing(1.0, 1.0, at=100.0)
    later = 100.0 + STANDING_STALE_SECONDS + 1
    assert standing.slow([{JOB: 4.0}], 0.5, now=100.0 + STANDING_STALE_SECONDS)
    assert not standing.slow([{JOB: 4.0}], 0.5, now=later)
    assert standing.current(later) == {}
    standing.observe(JOB, 40, 10_000, later)  # a fresh start, not folded into the old rate
    assert standing.rates[JOB] == (4.0, 1, later)


@pytest.mark.parametrize(
    ("slow", "peers", "oldest_age_ms", "wait_ms"),
    [
        (False, 2, 0, 0.0),  # not slow: it pulls as usual
        (False, 2, None, 0.0),
        (True, 0, 0, 0.0),  # alone: it takes everything, however slow
        (True, 0, None, 0.0),
        (True, 2, None, 250.0),  # nothing waits: look again soon
        (True, 2, 0, 250.0),  # a fresh slice: its peers take it
        (True, 2, 900, 100.0),  # nearly a slice length: look again when it will have waited one
        (True, 2, 999, 1.0),
        (True, 2, 1000, 0.0),  # waited a whole slice: the peers are all busy, it takes it
        (True, 1, 5000, 0.0),
    ],
)
def test_a_slow_worker_waits_for_a_slice_to_have_waited_a_slice_length(
    slow: bool, peers: int, oldest_age_ms: int | None, wait_ms: float
) -> None:
    assert pull_wait_ms(slow=slow, peers=peers, oldest_age_ms=oldest_age_ms, slice_ms=SLICE_MS) == wait_ms


def test_the_wait_follows_the_slice_length() -> None:
    assert pull_wait_ms(slow=True, peers=1, oldest_age_ms=400, slice_ms=400) == 0.0
    assert pull_wait_ms(slow=True, peers=1, oldest_age_ms=350, slice_ms=400) == 50.0
    assert pull_wait_ms(slow=True, peers=1, oldest_age_ms=0, slice_ms=400) == 100.0


@pytest.mark.parametrize(
    ("mine", "peers", "compared"),
    [
        ((1.0, 1.0), [{JOB: 4.0}], True),
        ((3.0, 3.0), [{JOB: 4.0}], False),
        ((1.0,), [{JOB: 4.0}], None),  # not measured enough here
        ((1.0, 1.0), [{}], None),  # nor there
        ((1.0, 1.0), [{"hash_chain": 4.0}], None),
    ],
)
def test_compare_says_none_when_there_is_nothing_to_compare(
    mine: tuple[float, ...], peers: list[dict[str, float]], compared: bool | None
) -> None:
    assert _standing(*mine).compare(JOB, peers, 0.5, now=100.0) is compared
    assert _standing(*mine).compare(JOB, peers, 0.0, now=100.0) is None  # rule off


@pytest.mark.parametrize(
    ("late", "compared", "judged"),
    [
        (False, None, True),  # nothing to compare: the task's pace decides, as before
        (False, True, True),  # slow against its peers too: a move finds a faster worker
        (False, False, False),  # as fast as its peers: the whole fleet is slower, a move only loses its place
        (True, None, False),  # taken late: kept
        (True, True, False),
    ],
)
def test_which_slices_the_per_slice_rule_may_move(late: bool, compared: bool | None, judged: bool) -> None:
    assert judge_slice(late=late, compared=compared) is judged
