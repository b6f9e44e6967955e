"""Moving work off a straggler: the `pace` field in the sealed state, and the engine's use of it.

The policy's decisions themselves are tables in test_policy.py; here the
field's round trip through every layout, and rounds of the real engine with
test_engine's fake clock (no pool, no network).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from mrtr_worker.sealing.layout import Pace, StateLayout, Trace
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
)

TEN_PER_SECOND = Pace(rate=10.0, samples=2)
"""What earlier instances gave the request: 100 ms a step."""


def state_with(pace: Pace | None, *, hops: int = 1, done: int = 0, n: int = 20) -> str:
    """A state handed back `hops` times after `done` of `n` steps, carrying `pace`."""
    data = {"checkpoint": {"n": n, "i": done}, "steps": done}
    return IDENTITY.layout.encode(data, Trace(hops=hops, visited=[["w-fast", 2]] * hops, pace=pace), {})


def pace_of(request_state: str) -> Pace | None:
    return IDENTITY.layout.decode(request_state).trace.pace


# -- the field ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("reader", "writer", "fmt"), [(1, 1, 1), (2, 1, 1), (1, 2, 1), (2, 2, 1), (2, 2, 2)])
def test_pace_round_trips_between_versions_in_every_format(reader: int, writer: int, fmt: int) -> None:
    pace = Pace(rate=3.125, samples=4, moves=1, fled="w-slow")
    text = StateLayout(writer, fmt).encode({"x": 1}, Trace(hops=3, visited=[["a", 1]], pace=pace), {})
    doc = json.loads(text)
    assert doc["pace"] == {"rate": 3.125, "n": 4, "moves": 1, "fled": "w-slow"}  # top level, outside data and trace

    decoded = StateLayout(reader).decode(text)
    assert decoded.trace.pace == pace
    assert decoded.data == {"x": 1}
    assert "pace" not in decoded.extra
    assert (decoded.trace.hops, decoded.trace.fair_hops) == (3, 2)


@pytest.mark.parametrize("fmt", [1, 2])
def test_a_state_without_pace_reads_as_none_and_is_written_without_it(fmt: int) -> None:
    layout = StateLayout(2, fmt)
    decoded = layout.decode(layout.encode({"x": 1}, Trace(hops=2, visited=[]), {}))
    assert decoded.trace.pace is None
    assert decoded.trace.fair_hops == 2
    assert "pace" not in json.loads(layout.encode(decoded.data, decoded.trace, decoded.extra))


@pytest.mark.parametrize(
    "raw",
    [
        "fast",
        [1, 2],
        {"rate": "10", "n": 1},
        {"rate": -1.0, "n": 1},
        {"rate": float("nan"), "n": 1},
        {"rate": 1.0},
        {"rate": 1.0, "n": 1.5},
        {"rate": 1.0, "n": 1, "moves": -1},
        {"rate": True, "n": 1},
    ],
)
def test_a_pace_this_build_does_not_understand_is_ignored_not_fatal(raw: object) -> None:
    # A later build may change the field's shape; it is a hint, so the request goes on without it.
    doc = json.loads(IDENTITY.layout.encode({"x": 1}, Trace(hops=1, visited=[]), {}))
    doc["pace"] = raw
    decoded = StateLayout(1).decode(json.dumps(doc))
    assert decoded.trace.pace is None
    assert decoded.data == {"x": 1}


def test_the_field_is_one_an_older_build_carries_forward() -> None:
    # An older build knows only the format's own keys; everything else is carried forward untouched on
    # re-seal. `pace` is such a top-level key, next to `sealed_at` (what an older reader does with it is
    # the unknown-field rule, pinned in test_versions and here on a field this build also does not know).
    text = StateLayout(2, 1).encode({}, Trace(hops=1, visited=[], pace=TEN_PER_SECOND), {"from_the_future": [1]})
    assert set(json.loads(text)) == {"fmt", "data", "hops", "visited", "sealed_at", "pace", "from_the_future"}
    decoded = StateLayout(1).decode(text)
    assert decoded.extra == {"from_the_future": [1], "sealed_at": json.loads(text)["sealed_at"]}


# -- the engine --------------------------------------------------------------------------------------------


async def test_a_round_carries_the_rate_it_measured() -> None:
    # 250 ms steps, 1000 ms slice: boundaries at 0, 250, ... 1000 ms, so 4 steps in 1 s.
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock, max_slice_ms=1000)
    hint, _, state = handed_back(await engine.run(make_round(), counting(clock, 0.25), {"n": 20}))
    assert hint["reason"] == "slice"
    assert pace_of(state) == Pace(rate=4.0, samples=1, moves=0)


async def test_a_quarter_speed_instance_hands_the_request_on_without_ageing_it() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock)
    slow = counting(clock, 0.4)  # 400 ms a step here, where earlier instances took 100 ms

    hint, data, state = handed_back(await engine.run(make_round(state_with(TEN_PER_SECOND)), slow, {"n": 20}))

    assert hint == {"reason": "straggler", "hops": 2, "retryAfterMs": 0}
    assert data == {"checkpoint": {"n": 20, "i": 3}, "steps": 3}  # 1200 ms measured (the minimum is 1000 ms)
    assert pace_of(state) == Pace(rate=10.0, samples=2, moves=1, fled="w-test")  # its own rate left out
    trace = IDENTITY.layout.decode(state).trace
    assert (trace.hops, trace.fair_hops) == (2, 1)


async def test_a_prioritized_request_moves_off_a_straggler_within_its_budget_only() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock)
    slow = counting(clock, 0.4)

    moved = await engine.run(make_round(state_with(TEN_PER_SECOND, hops=4)), slow, {"n": 20})
    assert handed_back(moved)[0]["reason"] == "straggler"

    spent = Pace(rate=10.0, samples=4, moves=3)  # three moves made: it stays, and as a prioritized call runs out
    result, meta = complete(await engine.run(make_round(state_with(spent, hops=7)), slow, {"n": 20}))
    assert result == {"counted": 20}
    assert meta["hops"] == 7  # 4 ageing hops + 3 moves


async def test_a_request_as_fast_as_before_is_not_moved() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock, max_slice_ms=0)
    result, _ = complete(await engine.run(make_round(state_with(TEN_PER_SECOND)), counting(clock, 0.15), {"n": 20}))
    assert result == {"counted": 20}


async def test_straggler_moves_do_not_count_towards_admission_priority() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    engine, _ = make_engine(executor, clock, max_concurrent=1, min_slice_ms=10_000, max_slice_ms=0)
    computation = counting(clock)
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 1}))
    first = await executor.next_step()

    # Five hops, two of them straggler moves: three ageing hops, so still refused while the slot is taken.
    moved_twice = Pace(rate=10.0, samples=3, moves=2)
    hint, _, state = handed_back(await engine.run(make_round(state_with(moved_twice, hops=5)), computation, {"n": 4}))
    assert hint == {"reason": "admission", "hops": 6, "retryAfterMs": 200}  # backoff by ageing hops (3), too
    assert pace_of(state) == moved_twice

    first.run()
    complete(await asyncio.wait_for(running, WAIT))


async def test_the_straggler_rule_off_keeps_the_request_where_it_is() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock, straggler_ratio=0, max_slice_ms=0)
    result, _ = complete(await engine.run(make_round(state_with(TEN_PER_SECOND)), counting(clock, 0.4), {"n": 20}))
    assert result == {"counted": 20}


async def test_a_round_back_on_the_straggler_it_left_moves_on_before_any_step() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock)
    fled = Pace(rate=10.0, samples=2, moves=1, fled=IDENTITY.instance_id)

    hint, data, state = handed_back(await engine.run(make_round(state_with(fled, done=5)), counting(clock), {"n": 20}))

    assert hint == {"reason": "straggler", "hops": 2, "retryAfterMs": 0}
    assert data == {"checkpoint": {"n": 20, "i": 5}, "steps": 5}
    assert executor.submitted == 0
    assert pace_of(state) == Pace(rate=10.0, samples=2, moves=2, fled=IDENTITY.instance_id)

    # Once the budget is spent it stays, even here.
    spent = Pace(rate=10.0, samples=2, moves=3, fled=IDENTITY.instance_id)
    result, _ = complete(await engine.run(make_round(state_with(spent, done=5)), counting(clock), {"n": 20}))
    assert result == {"counted": 20}
