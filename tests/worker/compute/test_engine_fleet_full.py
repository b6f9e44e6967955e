"""A fleet-wide overload seen from one instance: a round another full instance refused queues here, and so do new ones,
unless the queue is longer than callers wait (`refuse_new_after_ms`): then a new call is refused as busy.

The engine with the fake executor and clock of `test_engine`: no pool, no network, no sleeps.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from mrtr_protocol.busy import SERVER_BUSY
from mrtr_worker.sealing.layout import Trace
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


def refused_elsewhere() -> str:
    """The state of a first round that another instance refused at admission (its slots were all taken)."""
    return IDENTITY.layout.encode({"refused": True}, Trace(hops=1, visited=[["elsewhere", 2]]), {})


async def test_a_round_refused_elsewhere_queues_here_and_new_calls_queue_behind_it_without_pressure() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    engine, metrics = make_engine(
        executor, clock, max_concurrent=1, min_slice_ms=0, max_slice_ms=0, fleet_full_hold_ms=1000
    )
    computation = counting(clock)
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 2}))
    first = await executor.next_step()

    bounced = asyncio.create_task(engine.run(make_round(refused_elsewhere()), computation, {"n": 1}))
    await settled(lambda: engine.slots.waiting == 1, "the round another full instance refused queued here")
    fresh = asyncio.create_task(engine.run(make_round(), computation, {"n": 1}))
    await settled(lambda: engine.slots.waiting == 2, "a new call queued too: the fleet looks full")
    assert metrics.registry.get_sample_value("mrtr_worker_fleet_full") == 1

    first.run()
    await executor.run_step()  # rounds wait and the minimum slice is 0: pressure would have ended it before this step
    result, meta = complete(await asyncio.wait_for(running, WAIT))
    assert (result, meta["hops"]) == ({"counted": 2}, 0)
    await executor.run_step()
    await executor.run_step()
    for queued in await asyncio.wait_for(asyncio.gather(bounced, fresh), WAIT):
        assert complete(queued)[0] == {"counted": 1}


async def test_the_fleet_looks_full_while_a_queue_lasts_then_a_refusal_probes_it_again() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    engine, metrics = make_engine(
        executor, clock, max_concurrent=1, min_slice_ms=10_000, max_slice_ms=0, fleet_full_hold_ms=1000
    )
    computation = counting(clock)
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 1}))
    first = await executor.next_step()
    bounced = asyncio.create_task(engine.run(make_round(refused_elsewhere()), computation, {"n": 1}))
    await settled(lambda: engine.slots.waiting == 1, "the round refused elsewhere queued here")

    clock.advance(5.0)  # long past the hold, but a round still queues here
    assert metrics.registry.get_sample_value("mrtr_worker_fleet_full") == 1
    first.run()
    complete(await asyncio.wait_for(running, WAIT))
    await executor.run_step()
    complete(await asyncio.wait_for(bounced, WAIT))

    clock.advance(1.5)  # the queue is gone and the evidence older than the hold
    assert metrics.registry.get_sample_value("mrtr_worker_fleet_full") == 0
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 1}))
    first = await executor.next_step()
    hint, data, _ = handed_back(await engine.run(make_round(), computation, {"n": 1}))
    assert hint["reason"] == "admission"
    assert data["refused"] is True  # the instance it lands on next learns that this one is full
    first.run()
    complete(await asyncio.wait_for(running, WAIT))


async def test_off_by_default_a_round_refused_elsewhere_is_refused_again() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    engine, metrics = make_engine(executor, clock, max_concurrent=1)
    computation = counting(clock)
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 1}))
    first = await executor.next_step()

    hint, _, _ = handed_back(await engine.run(make_round(refused_elsewhere()), computation, {"n": 1}))
    assert hint["reason"] == "admission"
    assert metrics.registry.get_sample_value("mrtr_worker_fleet_full") == 0
    first.run()
    complete(await asyncio.wait_for(running, WAIT))


def resumed_elsewhere(done: int) -> str:
    """The state of a call another instance ran `done` steps of, then handed back."""
    data = {"checkpoint": {"n": 3, "i": done}, "steps": done}
    return IDENTITY.layout.encode(data, Trace(hops=1, visited=[["elsewhere", 2]]), {})


async def test_a_new_call_that_would_queue_past_the_limit_is_refused_as_busy_and_started_work_queues() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    settings: dict[str, Any] = {
        "min_slice_ms": 0,
        "max_slice_ms": 0,
        "fleet_full_hold_ms": 1000,
        "refuse_new_after_ms": 1000,
    }
    engine, metrics = make_engine(executor, clock, max_concurrent=1, **settings)
    computation = counting(clock)  # 0.1 s a step
    warm = asyncio.create_task(engine.run(make_round(), computation, {"n": 20}))
    for _ in range(20):
        await executor.run_step()
    complete(await asyncio.wait_for(warm, WAIT))  # a round here held its slot for 2 s

    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 2}))
    first = await executor.next_step()
    with pytest.raises(MCPError) as refused:  # the fleet looks full, and it would wait 2 s for the slot
        await engine.run(make_round(refused_elsewhere()), computation, {"n": 1})
    assert refused.value.code == SERVER_BUSY
    assert refused.value.data == {"retryAfterMs": 1000, "expectedWaitMs": 2000}
    assert "Nothing ran" in refused.value.message
    assert metrics.registry.get_sample_value("mrtr_worker_busy_refusals_total") == 1

    # A call with steps done elsewhere queues: a refusal would throw its work away.
    resumed = asyncio.create_task(engine.run(make_round(resumed_elsewhere(1)), computation, {"n": 3}))
    await settled(lambda: engine.slots.waiting == 1, "the call with work done queued")
    first.run()
    await executor.run_step()
    complete(await asyncio.wait_for(running, WAIT))
    await executor.run_step()
    await executor.run_step()
    result, meta = complete(await asyncio.wait_for(resumed, WAIT))
    assert (result, meta["steps"]) == ({"counted": 3}, 3)
    assert metrics.registry.get_sample_value("mrtr_worker_busy_refusals_total") == 1


async def test_without_the_limit_a_new_call_queues_however_long_the_queue() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    settings: dict[str, Any] = {"min_slice_ms": 0, "max_slice_ms": 0, "fleet_full_hold_ms": 1000}
    engine, metrics = make_engine(executor, clock, max_concurrent=1, **settings)
    computation = counting(clock)
    warm = asyncio.create_task(engine.run(make_round(), computation, {"n": 20}))
    for _ in range(20):
        await executor.run_step()
    complete(await asyncio.wait_for(warm, WAIT))
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 1}))
    first = await executor.next_step()
    queued = asyncio.create_task(engine.run(make_round(refused_elsewhere()), computation, {"n": 1}))
    await settled(lambda: engine.slots.waiting == 1, "the new call queued")
    first.run()
    complete(await asyncio.wait_for(running, WAIT))
    await executor.run_step()
    complete(await asyncio.wait_for(queued, WAIT))
    assert metrics.registry.get_sample_value("mrtr_worker_busy_refusals_total") == 0
