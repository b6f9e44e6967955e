"""An instance's standing against its peers (`compute.standing`) and the admission move it drives, as tables.

Defaults under test: straggler ratio 0.5, a budget of 3 moves, 2 own slices and 3 peer paces before a
judgement, peer paces forgotten after `PEER_STALE_SECONDS`, the own rate kept and probed after `PROBE_EVERY`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from mrtr_protocol.rounds import EndOfRound
from mrtr_worker.compute.policy import Boundary, HandBack, Run, SheddingPolicy, SheddingSettings
from mrtr_worker.compute.standing import (
    PEER_KEEP,
    PEER_STALE_SECONDS,
    PROBE_EVERY,
    PROBE_PATIENCE,
    PROBE_SOON,
    Judgement,
    Standing,
    from_peer,
    slow_against,
)
from mrtr_worker.config import WorkerSettings
from mrtr_worker.sealing.keyring import new_ring
from mrtr_worker.sealing.layout import Pace
from tests.worker.compute.decisions import arrive, reason_at

T0 = 1000.0
PEER = Pace(rate=10.0, samples=2)


@pytest.mark.parametrize(
    ("own", "peers", "ratio", "slow"),
    [
        (2.5, [10.0, 10.0, 10.0], 0.5, True),  # a quarter of its peers' speed
        (4.99, [10.0, 10.0, 10.0], 0.5, True),
        (5.0, [10.0, 10.0, 10.0], 0.5, False),  # exactly the ratio: not clearly slower
        (2.5, [10.0, 10.0], 0.5, False),  # two peer paces are not yet a reference
        (None, [10.0, 10.0, 10.0], 0.5, False),  # too few slices of its own
        (2.5, [], 0.5, False),  # alone: no evidence
        (2.5, [2.5, 2.6, 2.4], 0.5, False),  # the whole host is slow: the peers' paces are low too
        (2.5, [1.0, 10.0, 10.0], 0.5, True),  # the median, not the mean or the slowest, is the reference
        (2.5, [1.0, 1.0, 10.0], 0.5, False),
        (2.5, [10.0, 10.0, 10.0], 0.0, False),  # the straggler rule off
        (2.5, [10.0, 10.0, 10.0], 0.2, False),
    ],
)
def test_slow_against(own: float | None, peers: list[float], ratio: float, slow: bool) -> None:
    assert slow_against(own, peers, ratio) is slow


@pytest.mark.parametrize(
    ("visited", "peer"),
    [
        ([], False),  # a first round: nothing was measured anywhere
        ([["w-a", 2]], True),
        ([["w-a", 2], ["w-test", 2]], False),  # handed back by this instance: its own rate is the newest
        ([["w-test", 2], ["w-a", 1]], True),
        ([[]], False),
    ],
)
def test_a_pace_is_a_peers_only_if_another_instance_ended_the_last_round(
    visited: Sequence[Sequence[Any]], peer: bool
) -> None:
    assert from_peer(visited, "w-test") is peer


def slow_standing(*, own_slices: int = 2, peer_paces: int = 3, now: float = T0, step_aside: bool = False) -> Standing:
    """A standing that saw `own_slices` slices at 2.5 steps/s and `peer_paces` paces of 10 steps/s at `now`."""
    standing = Standing.for_step_aside(step_aside)
    for _ in range(own_slices):
        standing.observe("count", 5, 2000, now)
    for _ in range(peer_paces):
        standing.bring("count", PEER, peer=True, now=now)
    return standing


@pytest.mark.parametrize(
    ("own_slices", "peer_paces", "slow"), [(2, 3, True), (1, 3, False), (2, 2, False), (0, 9, False)]
)
def test_a_few_samples_on_each_side_decide(own_slices: int, peer_paces: int, slow: bool) -> None:
    assert slow_standing(own_slices=own_slices, peer_paces=peer_paces).slow("count", 0.5, T0) is slow


@pytest.mark.parametrize(
    ("later", "slow"), [(0.0, True), (PEER_STALE_SECONDS, True), (PEER_STALE_SECONDS + 0.01, False)]
)
def test_without_peer_paces_lately_the_standing_is_forgotten(later: float, slow: bool) -> None:
    assert slow_standing().slow("count", 0.5, T0 + later) is slow


def test_standing_is_per_tool() -> None:
    standing = slow_standing()
    assert standing.slow("count", 0.5, T0)
    assert not standing.slow("montecarlo", 0.5, T0)


@pytest.mark.parametrize(
    ("pace", "peer"),
    [
        (PEER, False),  # measured here
        (None, True),  # a new call
        (Pace(rate=0.0, samples=0, moves=1), True),  # moved before anything was measured
        (Pace(rate=0.0, samples=2), True),
    ],
)
def test_paces_that_say_nothing_of_the_peers_are_not_evidence(pace: Pace | None, peer: bool) -> None:
    standing = slow_standing(peer_paces=2)
    standing.bring("count", pace, peer=peer, now=T0)
    assert standing.peer_rates("count", T0) == [10.0, 10.0]
    assert not standing.slow("count", 0.5, T0)


def test_the_own_rate_follows_recent_slices_and_is_kept_however_old() -> None:
    standing = slow_standing()
    assert standing.own_rate("count") == 2.5
    standing.observe("count", 10, 1000, T0 + 1)  # recovered: 10 steps/s, weighted in by half
    assert standing.own_rate("count") == pytest.approx(6.25)
    assert not standing.slow("count", 0.5, T0 + 1)
    standing.observe("count", 0, 1000, T0 + 2)  # nothing ran: nothing learned
    assert standing.own["count"].slices == 3
    standing.observe("count", 5, 2000, T0 + 100)  # much later: still weighted in, not started over
    assert standing.own_rate("count") == pytest.approx(4.375)


def test_the_reference_is_the_median_of_the_recent_peer_paces() -> None:
    standing = Standing()
    assert standing.reference("count", T0) is None
    for rate in (4.0, 10.0, 12.0):
        standing.bring("count", Pace(rate=rate, samples=1), peer=True, now=T0)
    assert standing.reference("count", T0) == 10.0
    assert standing.reference("count", T0 + PEER_STALE_SECONDS + 1) is None
    assert standing.reference("montecarlo", T0) is None


@pytest.mark.parametrize(
    ("own_age", "probe_age", "judgement"),
    [
        (0.0, None, Judgement.SLOW),
        (PROBE_EVERY, None, Judgement.SLOW),
        (PROBE_EVERY + 0.01, None, Judgement.PROBE),  # not measured lately: one round runs here to measure
        (PROBE_EVERY + 5, 1.0, Judgement.SLOW),  # a probe is out: the others are still handed on
        (PROBE_EVERY + 5, PROBE_PATIENCE, Judgement.SLOW),
        (PROBE_EVERY + 5, PROBE_PATIENCE + 0.01, Judgement.PROBE),  # that probe never reported: another
    ],
)
def test_a_slow_instance_keeps_its_standing_and_probes_one_round_at_a_time(
    own_age: float, probe_age: float | None, judgement: Judgement
) -> None:
    now = T0 + own_age
    standing = slow_standing()
    for _ in range(3):
        standing.bring("count", PEER, peer=True, now=now)  # rounds keep bringing peer paces in
    if probe_age is not None:
        standing.probing["count"] = now - probe_age
    assert standing.judge("count", 0.5, now) is judgement


def test_a_probe_confirms_the_standing_or_lifts_a_recovered_instance_out_of_it() -> None:
    standing = slow_standing()
    later = T0 + PROBE_EVERY + 1
    for _ in range(3):
        standing.bring("count", PEER, peer=True, now=later)
    assert standing.judge("count", 0.5, later) is Judgement.PROBE
    assert standing.judge("count", 0.5, later) is Judgement.PROBE  # asking records nothing
    standing.start_probe("count", later)
    assert standing.judge("count", 0.5, later) is Judgement.SLOW  # one probe at a time
    standing.observe("count", 3, 1000, later + 1)  # the probe's slice: still slow (3 steps/s against 10)
    assert standing.judge("count", 0.5, later + 1) is Judgement.SLOW
    assert "count" not in standing.probing

    recovered = slow_standing()
    for _ in range(3):
        recovered.bring("count", PEER, peer=True, now=later)
    assert recovered.judge("count", 0.5, later) is Judgement.PROBE
    recovered.start_probe("count", later)
    recovered.observe("count", 10, 1000, later + 1)  # full speed again: 6.25 weighted, over half of 10
    assert recovered.judge("count", 0.5, later + 1) is Judgement.RUN


@pytest.mark.parametrize(("own_slices", "peer_paces"), [(1, 3), (2, 2), (0, 9)])
def test_too_little_evidence_runs_every_round(own_slices: int, peer_paces: int) -> None:
    standing = slow_standing(own_slices=own_slices, peer_paces=peer_paces)
    assert standing.judge("count", 0.5, T0) is Judgement.RUN


def test_only_the_newest_peer_paces_count() -> None:
    standing = slow_standing(peer_paces=0)
    for _ in range(PEER_KEEP):
        standing.bring("count", Pace(rate=2.5, samples=2), peer=True, now=T0)
    assert not standing.slow("count", 0.5, T0)  # peers as slow as this instance
    for _ in range(PEER_KEEP // 2 + 1):
        standing.bring("count", PEER, peer=True, now=T0)
    assert standing.slow("count", 0.5, T0)  # the peers got faster: the median follows


# -- the policy's admission move ----------------------------------------------------------------------------

DEFAULT = SheddingPolicy(SheddingSettings())


@pytest.mark.parametrize(
    ("policy", "pace", "slow", "hands_on"),
    [
        (DEFAULT, None, True, True),  # a new call
        (DEFAULT, PEER, True, True),
        (DEFAULT, Pace(rate=10.0, samples=2, moves=2), True, True),
        (DEFAULT, Pace(rate=10.0, samples=2, moves=3), True, False),  # no moves left: served here
        (DEFAULT, PEER, False, False),
        (SheddingPolicy(SheddingSettings(straggler_ratio=0)), PEER, True, False),
        (SheddingPolicy(SheddingSettings(enabled=False)), PEER, True, False),
        (SheddingPolicy(SheddingSettings(straggler_budget=0)), None, True, False),
        (SheddingPolicy(SheddingSettings(straggler_at_admission=False)), PEER, True, False),  # slices only
    ],
)
def test_hands_on_at_admission(policy: SheddingPolicy, pace: Pace | None, slow: bool, hands_on: bool) -> None:
    decision = arrive(policy, pace, slow=slow, here="w-slow")
    assert (isinstance(decision, HandBack) and decision.reason is EndOfRound.STRAGGLER) is hands_on
    assert hands_on or decision == Run()


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (None, Pace(rate=0.0, samples=0, moves=1, fled="w-slow")),
        (Pace(rate=10.0, samples=2, moves=1, fled="w-other"), Pace(rate=10.0, samples=2, moves=2, fled="w-slow")),
    ],
)
def test_an_admission_move_spends_one_move_and_keeps_the_rate(before: Pace | None, after: Pace) -> None:
    assert arrive(DEFAULT, before, slow=True, here="w-slow") == HandBack(EndOfRound.STRAGGLER, after)


def test_admission_moves_stop_at_the_budget() -> None:
    pace: Pace | None = None
    moves = 0
    while isinstance(decision := arrive(DEFAULT, pace, slow=True, here=f"w-slow-{moves}"), HandBack):
        pace = decision.pace
        moves += 1
    assert moves == SheddingSettings().straggler_budget


# -- where a round handed on by a straggler lands ----------------------------------------------------------

FLED = Pace(rate=10.0, samples=2, moves=1, fled="w-slow")


@pytest.mark.parametrize(
    ("policy", "pace", "last", "here", "fled"),
    [
        (DEFAULT, FLED, "w-slow", "w-fast", True),  # straight from the straggler
        (DEFAULT, FLED, "w-slow", "w-slow", False),  # back on the straggler itself (alone, or round robin)
        (DEFAULT, FLED, "w-other", "w-fast", False),  # it has run elsewhere since
        (DEFAULT, FLED, None, "w-fast", False),
        (DEFAULT, Pace(rate=10.0, samples=2, moves=1), "w-slow", "w-fast", False),
        (DEFAULT, None, "w-slow", "w-fast", False),
        (SheddingPolicy(SheddingSettings(enabled=False)), FLED, "w-slow", "w-fast", False),
    ],
)
def test_just_fled(policy: SheddingPolicy, pace: Pace | None, last: str | None, here: str, fled: bool) -> None:
    decision = arrive(policy, pace, here=here, last=last)
    if pace is not None and pace.fled == here and policy.settings.enabled:
        assert decision == HandBack(EndOfRound.STRAGGLER, replace(pace, moves=pace.moves + 1))  # back: it moves on
    else:
        assert decision == Run(fled)


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        (Boundary(slice_ms=5000, hops=0, waiting=3, draining=False, fled=True), None),  # no pressure, no slice
        (Boundary(slice_ms=5000, hops=0, waiting=3, draining=False), EndOfRound.PRESSURE),
        (Boundary(slice_ms=0, hops=0, waiting=0, draining=True, fled=True), EndOfRound.DRAIN),
        (  # off a second straggler all the same, within the budget
            Boundary(slice_ms=1000, hops=0, waiting=0, draining=False, steps=2, pace=FLED, fled=True),
            EndOfRound.STRAGGLER,
        ),
    ],
)
def test_a_round_just_fled_is_served_like_a_prioritized_one(at: Boundary, expected: EndOfRound | None) -> None:
    assert reason_at(DEFAULT, at) is expected


@pytest.mark.parametrize("setting", ["straggler_at_admission", "step_aside"])
@pytest.mark.parametrize(("value", "expected"), [("false", False), ("true", True)])
def test_the_switches_reach_the_policy(
    monkeypatch: pytest.MonkeyPatch, setting: str, value: str, expected: bool
) -> None:
    """`MRTR_WORKER_STRAGGLER_AT_ADMISSION` and `MRTR_WORKER_STEP_ASIDE`."""
    monkeypatch.setenv("MRTR_WORKER_KEYRING", new_ring("k1").dumps())
    monkeypatch.setenv("MRTR_WORKER_ALLOW_ANONYMOUS", "true")
    monkeypatch.setenv(f"MRTR_WORKER_{setting.upper()}", value)
    assert getattr(WorkerSettings().shedding, setting) is expected


# -- stepping aside: out of the proxy's rotation while every round would be handed on -----------------------


@pytest.mark.parametrize(
    ("later", "probe_age", "aside"),
    [
        (0.0, None, True),  # judged slow, measured just now: every round would be handed on
        (PROBE_EVERY, None, True),
        (PROBE_EVERY + 0.01, None, False),  # a probe is due: back in rotation, so a round can reach it
        (PROBE_EVERY + 1, 0.5, True),  # the probe runs: the others would be handed on again
        (PROBE_EVERY + 1, PROBE_PATIENCE + 0.01, False),  # that probe never reported: another is due
    ],
)
def test_a_slow_instance_stands_aside_until_a_probe_is_due(later: float, probe_age: float | None, aside: bool) -> None:
    standing = slow_standing()
    now = T0 + later
    for _ in range(3):
        standing.bring("count", PEER, peer=True, now=now)
    if probe_age is not None:
        standing.probing["count"] = now - probe_age
    assert standing.aside(0.5, now) is aside


@pytest.mark.parametrize(
    ("standing", "ratio", "aside"),
    [
        (slow_standing(own_slices=1), 0.5, False),  # too little evidence: its rounds run here
        (slow_standing(peer_paces=2), 0.5, False),
        (slow_standing(), 0.0, False),  # the straggler rule off
        (Standing(), 0.5, False),  # nothing seen yet
    ],
)
def test_without_a_slow_judgement_an_instance_stays_in_rotation(standing: Standing, ratio: float, aside: bool) -> None:
    assert standing.aside(ratio, T0) is aside


@pytest.mark.parametrize(
    ("step_aside", "forget_peers", "first_probe_after"), [(False, True, PROBE_EVERY), (True, False, PROBE_SOON)]
)
def test_an_instance_that_steps_aside_keeps_its_peers_and_probes_a_new_verdict_soon(
    step_aside: bool, forget_peers: bool, first_probe_after: float
) -> None:
    standing = Standing.for_step_aside(step_aside)
    assert (standing.forget_peers, standing.first_probe_after) == (forget_peers, first_probe_after)


@pytest.mark.parametrize(
    ("probe_rate", "later", "aside"),
    [
        (None, PROBE_SOON, True),  # a verdict no probe has tested: it may rest on one pause
        (None, PROBE_SOON + 0.01, False),  # so a probe is due after about a slice
        (2.5, PROBE_SOON + 0.01, True),  # the probe's slice was slow too: confirmed, the next waits longer
        (2.5, PROBE_EVERY, True),
        (2.5, PROBE_EVERY + 0.01, False),
        (7.0, 0.0, True),  # the probe ran at 7 steps/s: the blend (4.75) is still under half its peers' 10
        (7.0, PROBE_SOON + 0.01, False),  # but the probe was not slow: probed again soon
        (10.0, 0.0, False),  # recovered: the blend (6.25) is out of the verdict
    ],
)
def test_stepping_aside_a_verdict_is_probed_soon_until_a_probe_confirms_it(
    probe_rate: float | None, later: float, aside: bool
) -> None:
    """A 2 s pause (a long garbage collection) stalls the slices under way and reads as slowness; out of rotation
    until `PROBE_EVERY`, the instance was lost for 10 s after every pause. `later`: after the probe's slice."""
    standing = slow_standing(step_aside=True)
    ended = T0
    if probe_rate is not None:
        started = T0 + PROBE_SOON + 0.01
        assert standing.judge("count", 0.5, started) is Judgement.PROBE
        standing.start_probe("count", started)
        ended = started + 2
        for _ in range(3):
            standing.bring("count", PEER, peer=True, now=ended)
        standing.observe("count", int(probe_rate * 2), 2000, ended)  # the probe's slice, two seconds
        assert standing.probed == {"count": probe_rate}
    assert standing.aside(0.5, ended + later) is aside


def test_a_slice_that_reports_while_no_probe_is_out_is_no_probes_verdict() -> None:
    standing = slow_standing(step_aside=True)
    standing.observe("count", 5, 2000, T0)
    assert standing.probed == {}
    assert not standing.aside(0.5, T0 + PROBE_SOON + 0.01)


def test_by_default_a_new_verdict_waits_the_whole_probe_period() -> None:
    assert slow_standing().aside(0.5, T0 + PROBE_SOON + 0.01)
    assert slow_standing().judge("count", 0.5, T0 + PROBE_SOON + 0.01) is Judgement.SLOW


def test_standing_aside_forgets_with_the_peer_paces() -> None:
    """Peers' paces grow stale out of rotation; without them it is not judged slow and comes back."""
    assert not slow_standing().aside(0.5, T0 + PEER_STALE_SECONDS + 0.01)


def test_one_slow_tool_is_enough_to_stand_aside() -> None:
    standing = slow_standing()
    standing.observe("montecarlo", 10, 1000, T0)
    standing.observe("montecarlo", 10, 1000, T0)
    assert standing.aside(0.5, T0)


@pytest.mark.parametrize(
    ("settings", "aside", "steps_aside"),
    [
        (SheddingSettings(step_aside=True), True, True),
        (SheddingSettings(step_aside=True), False, False),
        (SheddingSettings(), True, False),  # off by default: it stays in rotation and bounces the rounds
        (SheddingSettings(step_aside=True, straggler_ratio=0), True, False),
        (SheddingSettings(step_aside=True, enabled=False), True, False),
        (SheddingSettings(step_aside=True, straggler_at_admission=False), True, False),  # it serves its rounds
    ],
)
def test_steps_aside_only_where_it_would_hand_rounds_on(
    settings: SheddingSettings, aside: bool, steps_aside: bool
) -> None:
    assert SheddingPolicy(settings).steps_aside(aside=aside) is steps_aside
