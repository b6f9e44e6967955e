"""The real engine learning it is slow from the paces rounds bring in, and handing rounds on at admission.

test_engine's fake clock and inline executor: a step costs a fixed time on the clock, so every slice's rate is
known; `executor.submitted` tells whether a round ran any step here.
"""

from __future__ import annotations

import asyncio

from mrtr_worker.compute.computation import Computation
from mrtr_worker.compute.engine import Engine
from mrtr_worker.compute.standing import PROBE_EVERY, PROBE_SOON
from mrtr_worker.sealing.layout import Pace, Trace
from tests.worker.compute.test_engine import (
    IDENTITY,
    WAIT,
    FakeClock,
    InlineExecutor,
    ManualExecutor,
    complete,
    counting,
    handed_back,
    make_engine,
    make_round,
    settled,
    state_after_hops,
)
from tests.worker.compute.test_straggler import TEN_PER_SECOND, pace_of

SLOW_STEP = 0.4
"""400 ms a step here, where the peers' paces say 100 ms: a quarter speed."""


def arriving(pace: Pace | None, *, last: str = "w-fast", hops: int = 1, done: int = 0) -> str:
    """A state of a 20-step count handed back `hops` times, the last time by `last`, carrying `pace`."""
    data = {"checkpoint": {"n": 20, "i": done}, "steps": done}
    return IDENTITY.layout.encode(data, Trace(hops=hops, visited=[[last, 2]] * hops, pace=pace), {})


def bring_peers(engine: Engine, clock: FakeClock, paces: int) -> None:
    """Paces of 10 steps/s from a peer arriving now, as the rounds that land here keep bringing them."""
    for _ in range(paces):
        engine.standing.bring("count", TEN_PER_SECOND, peer=True, now=clock())


async def learn(engine: Engine, slow: Computation, pace: Pace, *, last: str = "w-fast", rounds: int) -> None:
    """Serve `rounds` rounds carrying `pace`, each of which runs a measured slice here."""
    for _ in range(rounds):
        hint, _, _ = handed_back(await engine.run(make_round(arriving(pace, last=last)), slow, {"n": 20}))
        assert hint["reason"] in {"straggler", "slice"}


async def test_a_slow_instance_hands_rounds_on_at_admission_once_it_knows_and_probes_now_and_then() -> None:
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

    # Not measured for a while (it handed everything on), it lets one round run here as a probe: the per-slice
    # rule moves that one after its measured slice, which confirms the standing for the next rounds.
    clock.advance(PROBE_EVERY + 1)
    bring_peers(engine, clock, 2)  # with the pace each round brings, peers' paces keep arriving
    ran = executor.submitted
    hint, _, _ = handed_back(await engine.run(make_round(arriving(TEN_PER_SECOND)), slow, {"n": 20}))
    assert hint["reason"] == "straggler"
    assert executor.submitted > ran  # measured here first
    ran = executor.submitted
    hint, _, _ = handed_back(await engine.run(make_round(arriving(TEN_PER_SECOND)), slow, {"n": 20}))
    assert hint["reason"] == "straggler"
    assert executor.submitted == ran  # handed on at admission again


async def test_a_recovered_instance_learns_it_from_its_probe() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock, max_slice_ms=1500)
    await learn(engine, counting(clock, SLOW_STEP), TEN_PER_SECOND, rounds=3)
    clock.advance(PROBE_EVERY + 1)
    bring_peers(engine, clock, 2)
    fast = counting(clock, 0.1)  # full speed again
    hint, _, _ = handed_back(await engine.run(make_round(arriving(TEN_PER_SECOND)), fast, {"n": 20}))
    assert hint["reason"] == "slice"  # the probe ran its whole slice here
    ran = executor.submitted
    hint, _, _ = handed_back(await engine.run(make_round(arriving(TEN_PER_SECOND)), fast, {"n": 20}))
    assert hint["reason"] == "slice"
    assert executor.submitted > ran  # the next round runs here too


async def test_a_new_call_is_measured_against_the_peers_paces_seen_here() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock, max_slice_ms=2000)
    slow = counting(clock, SLOW_STEP)
    arrived = arriving(TEN_PER_SECOND, done=19)
    complete(await engine.run(make_round(arrived), counting(clock, 0.1), {"n": 20}))  # a peer pace, one step

    hint, data, state = handed_back(await engine.run(make_round(), slow, {"n": 20}))
    assert hint["reason"] == "straggler"  # after its measured slice, not its whole time slice
    assert 0 < data["steps"] < 5
    assert pace_of(state) == Pace(rate=0.0, samples=0, moves=1, fled=IDENTITY.instance_id)

    # Its second round back here, with a pace measured here alone, is measured against the peers too.
    back_here = arriving(Pace(rate=2.5, samples=1), last=IDENTITY.instance_id)
    hint, _, _ = handed_back(await engine.run(make_round(back_here), slow, {"n": 20}))
    assert hint["reason"] == "straggler"


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


async def test_a_round_a_straggler_handed_on_waits_for_a_slot_and_is_not_shed_by_pressure() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    engine, _ = make_engine(executor, clock, max_concurrent=1, min_slice_ms=100)
    computation = counting(clock)
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 1}))
    first = await executor.next_step()

    fled = Pace(rate=10.0, samples=2, moves=1, fled="w-slow")
    from_the_straggler = asyncio.create_task(
        engine.run(make_round(arriving(fled, last="w-slow", done=17)), computation, {"n": 20})
    )
    await settled(lambda: engine.slots.waiting == 1, "the round from the straggler queues instead of being refused")
    first.run()
    complete(await asyncio.wait_for(running, WAIT))

    await executor.run_step()
    prioritized = asyncio.create_task(engine.run(make_round(state_after_hops(4)), computation, {"n": 1}))
    await settled(lambda: engine.slots.waiting == 1, "a prioritized round waits behind it")
    await executor.run_step()  # 200 ms into its slice with a round waiting: pressure would shed it here
    await executor.run_step()
    result, _ = complete(await asyncio.wait_for(from_the_straggler, WAIT))
    assert result == {"counted": 20}

    await executor.run_step()
    complete(await asyncio.wait_for(prioritized, WAIT))


async def test_a_round_refused_after_running_elsewhere_since_it_fled() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    engine, _ = make_engine(executor, clock, max_concurrent=1)
    computation = counting(clock)
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 1}))
    first = await executor.next_step()

    fled = Pace(rate=10.0, samples=2, moves=1, fled="w-slow")
    hint, _, _ = handed_back(await engine.run(make_round(arriving(fled, last="w-other")), computation, {"n": 3}))
    assert hint["reason"] == "admission"

    first.run()
    complete(await asyncio.wait_for(running, WAIT))


async def test_a_round_back_on_the_straggler_it_fled_keeps_its_time_slice() -> None:
    """A lone instance that moved a call off itself (its rate dipped against the pace it set itself) meets the
    round again: with no moves left it is served, but as any round, so the time slice still ends it."""
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock, max_slice_ms=250)
    spent = Pace(rate=10.0, samples=2, moves=3, fled=IDENTITY.instance_id)
    hint, _, _ = handed_back(
        await engine.run(make_round(arriving(spent, last=IDENTITY.instance_id)), counting(clock), {"n": 20})
    )
    assert hint["reason"] == "slice"
    assert executor.submitted < 20


async def test_a_slow_instance_steps_aside_while_it_would_hand_every_round_on() -> None:
    """`MRTR_WORKER_STEP_ASIDE`: its /readyz asks the proxy to skip it while every round would be handed on, and
    to send rounds again when a probe is due: soon for a new verdict (it may rest on one pause), after
    `PROBE_EVERY` once a probe's slice was slow too."""
    clock, executor = FakeClock(), InlineExecutor()
    engine, metrics = make_engine(executor, clock, step_aside=True)
    slow = counting(clock, SLOW_STEP)
    assert not engine.stepping_aside()
    await learn(engine, slow, TEN_PER_SECOND, rounds=2)
    bring_peers(engine, clock, 1)
    assert engine.stepping_aside()  # it knows: every round would be handed on at admission
    assert metrics.registry.get_sample_value("mrtr_worker_stepping_aside") == 1

    clock.advance(PROBE_SOON + 0.01)
    assert not engine.stepping_aside()  # no probe has tested the verdict: back in rotation so a round reaches it
    assert metrics.registry.get_sample_value("mrtr_worker_stepping_aside") == 0
    hint, _, _ = handed_back(await engine.run(make_round(arriving(TEN_PER_SECOND)), slow, {"n": 20}))
    assert hint["reason"] == "straggler"  # the probe, measured here and still slow
    assert engine.stepping_aside()

    clock.advance(PROBE_SOON + 0.01)
    bring_peers(engine, clock, 3)
    assert engine.stepping_aside()  # confirmed: the next probe waits the whole period
    clock.advance(PROBE_EVERY - PROBE_SOON)
    assert not engine.stepping_aside()


async def test_stepping_aside_is_off_by_default() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock)
    await learn(engine, counting(clock, SLOW_STEP), TEN_PER_SECOND, rounds=3)
    assert engine.standing.aside(0.5, clock())
    assert not engine.stepping_aside()
