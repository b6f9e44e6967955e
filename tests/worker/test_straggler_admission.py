"""The real engine learning it is slow from the paces rounds bring in, and handing rounds on at admission.

test_engine's fake clock and inline executor: a step costs a fixed time on the clock, so every slice's rate is
known; `executor.submitted` tells whether a round ran any step here.
"""

from __future__ import annotations

from mrtr_worker.compute.computation import Computation
from mrtr_worker.compute.engine import Engine
from mrtr_worker.compute.standing import STALE_SECONDS
from mrtr_worker.state_layout import Pace, Trace
from tests.worker.test_engine import (
    IDENTITY,
    FakeClock,
    InlineExecutor,
    counting,
    handed_back,
    make_engine,
    make_round,
)
from tests.worker.test_straggler import TEN_PER_SECOND, pace_of

SLOW_STEP = 0.4
"""400 ms a step here, where the peers' paces say 100 ms: a quarter speed."""


def arriving(pace: Pace | None, *, last: str = "w-fast", hops: int = 1, done: int = 0) -> str:
    """A state of a 20-step count handed back `hops` times, the last time by `last`, carrying `pace`."""
    data = {"checkpoint": {"n": 20, "i": done}, "steps": done}
    return IDENTITY.layout.encode(data, Trace(hops=hops, visited=[[last, 2]] * hops, pace=pace), {})


async def learn(engine: Engine, slow: Computation, pace: Pace, *, last: str = "w-fast", rounds: int) -> None:
    """Serve `rounds` rounds carrying `pace`, each of which runs a measured slice here."""
    for _ in range(rounds):
        hint, _, _ = handed_back(await engine.run(make_round(arriving(pace, last=last)), slow, {"n": 20}))
        assert hint["reason"] in {"straggler", "slice"}


async def test_a_slow_instance_hands_rounds_on_at_admission_once_it_knows_then_forgets() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, metrics = make_engine(executor, clock)
    slow = counting(clock, SLOW_STEP)

    # Two rounds from a peer at 10 steps/s: each is measured here (2.5 steps/s) and moved by the per-slice rule.
    await learn(engine, slow, TEN_PER_SECOND, rounds=2)
    ran = executor.submitted
    assert ran == 6

    # With the third peer pace it knows: the next round is handed on before any step, retried at once, without ageing.
    hint, data, state = handed_back(await engine.run(make_round(arriving(TEN_PER_SECOND, done=4)), slow, {"n": 20}))
    assert hint == {"reason": "straggler", "hops": 2, "retryAfterMs": 0}
    assert data == {"checkpoint": {"n": 20, "i": 4}, "steps": 4}
    assert pace_of(state) == Pace(rate=10.0, samples=2, moves=1, fled=IDENTITY.instance_id)
    assert IDENTITY.layout.decode(state).trace.fair_hops == 1

    # A new call too (it would otherwise run a whole slice here and carry this instance's rate as its pace).
    hint, data, state = handed_back(await engine.run(make_round(), slow, {"n": 20}))
    assert (hint["reason"], data["steps"]) == ("straggler", 0)
    assert pace_of(state) == Pace(rate=0.0, samples=0, moves=1, fled=IDENTITY.instance_id)
    assert executor.submitted == ran

    # A request with no moves left is served here, so the round cap holds.
    spent = Pace(rate=10.0, samples=2, moves=3)
    hint, _, _ = handed_back(await engine.run(make_round(arriving(spent, hops=3)), slow, {"n": 20}))
    assert hint["reason"] == "slice"  # it ran here for a whole slice
    assert executor.submitted > ran
    assert metrics.registry.get_sample_value("mrtr_worker_computations") == 0

    # Without new evidence for a stale period it forgets, runs the next round, and measures again.
    clock.advance(STALE_SECONDS + 1)
    ran = executor.submitted
    hint, _, _ = handed_back(await engine.run(make_round(arriving(TEN_PER_SECOND)), slow, {"n": 20}))
    assert hint["reason"] == "straggler"
    assert executor.submitted > ran  # measured here first: the per-slice rule moved it


async def test_no_admission_move_when_the_paces_come_from_this_instance_alone() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock)
    slow = counting(clock, SLOW_STEP)
    own = IDENTITY.instance_id

    await learn(engine, slow, TEN_PER_SECOND, last=own, rounds=4)  # every round was last handed back here
    ran = executor.submitted
    handed_back(await engine.run(make_round(arriving(TEN_PER_SECOND, last=own)), slow, {"n": 20}))
    assert executor.submitted > ran


async def test_no_admission_move_when_the_whole_host_is_slow() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock, max_slice_ms=2000)
    slow = counting(clock, SLOW_STEP)
    peers_as_slow = Pace(rate=2.5, samples=2)

    await learn(engine, slow, peers_as_slow, rounds=4)  # 2.5 steps/s here and on every peer: full slices
    ran = executor.submitted
    hint, _, _ = handed_back(await engine.run(make_round(arriving(peers_as_slow)), slow, {"n": 20}))
    assert hint["reason"] == "slice"
    assert executor.submitted > ran


async def test_the_rule_off_never_hands_on_at_admission() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock, straggler_ratio=0)
    slow = counting(clock, SLOW_STEP)

    await learn(engine, slow, TEN_PER_SECOND, rounds=4)
    ran = executor.submitted
    hint, _, _ = handed_back(await engine.run(make_round(arriving(TEN_PER_SECOND)), slow, {"n": 20}))
    assert hint["reason"] == "slice"
    assert executor.submitted > ran
