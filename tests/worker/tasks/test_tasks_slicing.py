"""The task runner's slice rules as one pure object (`tasks.slicing.SliceRules`), the one the runner and the fleet
simulator both drive. Tables, no processes; the runner's wiring is in test_tasks_straggler.py."""

from __future__ import annotations

from dataclasses import replace

from mrtr_protocol.rounds import EndOfRound
from mrtr_worker.compute.policy import Boundary, SheddingPolicy, SheddingSettings
from mrtr_worker.sealing.layout import Pace
from mrtr_worker.tasks.slicing import SliceRules

JOB = "count_primes"
NOW = 100.0


def _rules(ratio: float = 0.5, slice_ms: float = 1000.0) -> SliceRules:
    return SliceRules(SheddingPolicy(replace(SheddingSettings(), straggler_ratio=ratio)), slice_ms)


def _slow_rules() -> SliceRules:
    """A worker that measured itself at 1 step/s, twice."""
    rules = _rules()
    for _ in range(2):
        rules.observe(JOB, 1, 1000.0, NOW)
    return rules


def test_a_worker_under_half_its_peers_is_slow_and_waits_before_taking_fresh_slices() -> None:
    rules = _slow_rules()
    peers = [{JOB: 4.0}, {JOB: 4.0}]
    assert rules.slow(peers, NOW)
    assert not rules.slow(None, NOW), "peers not read yet: nothing to compare"
    assert rules.pull_wait_ms(peers, oldest_age_ms=None) > 0
    assert rules.pull_wait_ms(peers, oldest_age_ms=1000) == 0, "a slice waited a whole slice length: take it"
    assert rules.late(peers)


def test_a_slice_a_slow_worker_took_late_is_not_judged_and_a_fled_one_is_passed_on() -> None:
    rules = _slow_rules()
    peers = [{JOB: 4.0}]
    pace = Pace(rate=4.0, samples=2, moves=1, fled="w1")
    assert rules.opening(pace, JOB, peers, late=True, consumer="w1", now=NOW).judged is None
    fresh = rules.opening(pace, JOB, None, late=False, consumer="w1", now=NOW)
    assert fresh.judged == pace
    assert fresh.passes_on, "back on the straggler the task fled: handed on before any step"
    assert not rules.opening(pace, JOB, None, late=False, consumer="w2", now=NOW).passes_on


def test_a_slow_slice_ends_as_a_straggler_move_unless_no_other_worker_takes_slices() -> None:
    rules = _rules()
    boundary = Boundary(slice_ms=600, hops=0, waiting=0, draining=False, steps=1, pace=Pace(rate=10.0, samples=1))
    reason = rules.end(boundary)
    assert reason is EndOfRound.STRAGGLER
    assert rules.asks_alone(reason, None)
    assert not rules.asks_alone(reason, False), "asked once per slice"
    assert rules.end(replace(boundary, alone=True)) is None
    assert rules.end(replace(boundary, slice_ms=1000, alone=True)) is EndOfRound.SLICE


def test_the_checkpoint_of_a_move_carries_the_move_and_keeps_the_straggler_out_of_the_pace() -> None:
    rules = _rules()
    pace = Pace(rate=10.0, samples=1)
    moved_pace, moved = rules.checkpoint(pace, 1, 600.0, EndOfRound.STRAGGLER, "w1")
    assert moved
    assert moved_pace is not None
    assert (moved_pace.rate, moved_pace.moves, moved_pace.fled) == (10.0, 1, "w1")
    sliced, moved = rules.checkpoint(moved_pace, 10, 1000.0, EndOfRound.SLICE, "w2")
    assert not moved
    assert sliced is not None
    assert sliced.moves == 0, "a slice that ran resets the moves"
