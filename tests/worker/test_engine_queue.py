"""A prioritized call queued for a slot leaves the queue after `queue_wait_ms`, once per move of its budget.

The engine with the fake executor of `test_engine`: no pool, no network. The
wait is the engine's own timer (1 ms here), never a sleep of the test.
"""

from __future__ import annotations

import asyncio

from mrtr_worker.state_layout import Pace, Trace
from tests.worker.test_engine import (
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
