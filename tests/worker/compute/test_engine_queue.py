"""A prioritized call queued for a slot leaves on a rebalance (or after `queue_wait_ms`), within its budget of moves.

The engine with the fake executor of `test_engine`: no pool, no network. The
wait is the engine's own timer (1 ms here), never a sleep of the test.
"""

from __future__ import annotations

import asyncio

from mrtr_worker.lifecycle import Lifecycle
from mrtr_worker.sealing.layout import Pace, Trace
from tests.worker.compute.test_engine import (
    IDENTITY,
    WAIT,
    FakeClock,
    ManualExecutor,
    complete,
    counting,
    handed_back,
    make_engine,
    make_round,
    settled,
)


def prioritized_state(moves: int = 0) -> str:
    """A first-round state aged into priority (4 fair hops), with `moves` moves already spent."""
    pace = Pace(0.0, 0, moves=moves) if moves else None
    return IDENTITY.layout.encode({}, Trace(hops=4 + moves, visited=[["elsewhere", 2]] * 4, pace=pace), {})


async def test_a_prioritized_call_leaves_a_long_queue_as_a_move() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    engine, metrics = make_engine(
        executor, clock, max_concurrent=1, min_slice_ms=10_000, max_slice_ms=0, queue_wait_ms=1
    )
    computation = counting(clock)
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 1}))
    first = await executor.next_step()

    hint, data, state = handed_back(await engine.run(make_round(prioritized_state()), computation, {"n": 4}))

    assert hint == {"reason": "pressure", "hops": 5, "retryAfterMs": 0}  # retried at once
    assert data == {"checkpoint": {"n": 4, "i": 0}, "steps": 0}  # nothing ran here, nothing lost
    trace = IDENTITY.layout.decode(state).trace
    assert trace.pace == Pace(0.0, 0, moves=1)
    assert trace.fair_hops == 4  # still prioritized: the move did not age it
    assert engine._slots.waiting == 0  # it left the queue
    first.run()
    complete(await asyncio.wait_for(running, WAIT))
    assert metrics.computations._value.get() == 0  # the slot was given back, not leaked


async def test_a_prioritized_call_with_no_moves_left_waits_for_its_slot() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    engine, _ = make_engine(executor, clock, max_concurrent=1, min_slice_ms=10_000, max_slice_ms=0, queue_wait_ms=1)
    computation = counting(clock)
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 1}))
    first = await executor.next_step()
    queued = asyncio.create_task(engine.run(make_round(prioritized_state(moves=3)), computation, {"n": 1}))
    await settled(lambda: engine._slots.waiting == 1, "the call queued for the slot")
    await asyncio.sleep(0.01)  # ten times the queue wait: it must still be queued (no move left)
    assert engine._slots.waiting == 1
    assert not queued.done()

    first.run()
    complete(await asyncio.wait_for(running, WAIT))
    await executor.run_step()
    result, meta = complete(await asyncio.wait_for(queued, WAIT))
    assert result == {"counted": 1}
    assert meta["hops"] == 7


async def test_a_rebalance_moves_the_calls_queued_here_at_once() -> None:
    clock, executor, lifecycle = FakeClock(), ManualExecutor(), Lifecycle()
    engine, metrics = make_engine(executor, clock, lifecycle, max_concurrent=1, min_slice_ms=10_000, max_slice_ms=0)
    computation = counting(clock)
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 1}))
    first = await executor.next_step()
    queued = [
        asyncio.create_task(engine.run(make_round(prioritized_state(moves)), computation, {"n": 2})) for moves in (0, 2)
    ]
    spent = asyncio.create_task(engine.run(make_round(prioritized_state(moves=3)), computation, {"n": 1}))
    await settled(lambda: engine._slots.waiting == 3, "three calls queued for the slot")

    moved = await asyncio.wait_for(lifecycle.rebalance().moved(), WAIT)

    assert moved == 2  # three were waiting; the one with no move left stays and is not counted
    for task, moves in zip(queued, (1, 3), strict=True):
        hint, data, state = handed_back(await asyncio.wait_for(task, WAIT))
        assert hint["reason"] == "pressure"
        assert data == {"checkpoint": {"n": 2, "i": 0}, "steps": 0}
        trace = IDENTITY.layout.decode(state).trace
        assert trace.pace is not None
        assert trace.pace.moves == moves
        assert trace.fair_hops == 4
    await settled(lambda: engine._slots.waiting == 1, "the call with no move left still queued")
    assert not spent.done()
    first.run()
    complete(await asyncio.wait_for(running, WAIT))
    await executor.run_step()
    complete(await asyncio.wait_for(spent, WAIT))  # it got the slot: none leaked to the calls that left
    assert metrics.computations._value.get() == 0


async def test_a_rebalance_leaves_later_calls_and_stay_where_you_land_alone() -> None:
    clock, executor, lifecycle = FakeClock(), ManualExecutor(), Lifecycle()
    engine, _ = make_engine(executor, clock, lifecycle, enabled=False, max_concurrent=1, max_slice_ms=0)
    computation = counting(clock)
    lifecycle.rebalance()  # before the calls: it concerns only those queued at the time
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 1}))
    first = await executor.next_step()
    queued = asyncio.create_task(engine.run(make_round(prioritized_state()), computation, {"n": 1}))
    await settled(lambda: engine._slots.waiting == 1, "the call queued for the slot")
    # shedding off: a queued call waits for its slot whatever happens elsewhere
    assert await asyncio.wait_for(lifecycle.rebalance().moved(), WAIT) == 0
    first.run()
    complete(await asyncio.wait_for(running, WAIT))
    await executor.run_step()
    complete(await asyncio.wait_for(queued, WAIT))  # not handed back
