"""The computation engine with an in-process executor and a fake clock: no pool, no network.

Steps run on the event loop's thread, either at once (`InlineExecutor`) or
when the test says so (`ManualExecutor`), and each step advances the fake
clock by a fixed amount, so every slice, pressure and drain decision below
falls at a known step boundary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor, Future
from types import SimpleNamespace
from typing import Any, ParamSpec, TypeVar, cast

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, InputRequiredResult
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from mrtr_protocol.rounds import ROUND_META_KEY
from mrtr_worker.compute.computation import Computation, State, run_uninterrupted
from mrtr_worker.compute.engine import COMPUTE_META_KEY, Engine
from mrtr_worker.compute.policy import SheddingSettings
from mrtr_worker.lifecycle import Lifecycle
from mrtr_worker.metrics import WorkerMetrics
from mrtr_worker.sealing.layout import StateLayout, Trace
from mrtr_worker.tool_api.rounds import Round, WorkerInstance

P = ParamSpec("P")
T = TypeVar("T")

WAIT = 5.0
"""Only guards against a hang; never a speed assertion."""
TURNS = 100
STEP_SECONDS = 0.1
"""What one step costs on the fake clock."""
IDENTITY = WorkerInstance(instance_id="w-test", version=2, layout=StateLayout(2))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class InlineExecutor(Executor):
    """Runs each step at once, in this process."""

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        self.submitted += 1
        future: Future[T] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


class PendingStep:
    def __init__(self, run: Callable[[], None]) -> None:
        self.run = run


class ManualExecutor(Executor):
    """Holds every submitted step until the test runs it: the test decides what happens during a step."""

    def __init__(self) -> None:
        self._pending: asyncio.Queue[PendingStep] = asyncio.Queue()
        self.submitted = 0

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        self.submitted += 1
        future: Future[T] = Future()
        self._pending.put_nowait(PendingStep(lambda: future.set_result(fn(*args, **kwargs))))
        return future

    async def next_step(self) -> PendingStep:
        """The next step the engine submitted (waiting for it), not yet run."""
        return await asyncio.wait_for(self._pending.get(), WAIT)

    async def run_step(self) -> None:
        (await self.next_step()).run()

    @property
    def idle(self) -> bool:
        return self._pending.empty()


def counting(clock: FakeClock, step_seconds: float = STEP_SECONDS) -> Computation:
    """Counts to `n`, one per step; each step takes `step_seconds` on the fake clock."""

    def initial(arguments: dict[str, Any]) -> State:
        return {"n": int(arguments["n"]), "i": 0}

    def step(state: State) -> State:
        clock.advance(step_seconds)
        return {**state, "i": state["i"] + 1}

    return Computation(
        name="count",
        initial=initial,
        step=step,
        done=lambda state: bool(state["i"] >= state["n"]),
        result=lambda state: {"counted": state["i"]},
        total_steps=lambda state: int(state["n"] - state["i"]),
    )


def make_round(request_state: str | None = None, *, modern: bool = True) -> Round:
    """A round as the SDK would hand it to a tool: `request_state` is the unsealed state of the previous round."""
    ctx = SimpleNamespace(
        client_capabilities=None,
        input_responses=None,
        protocol_version=MODERN_PROTOCOL_VERSIONS[0] if modern else HANDSHAKE_PROTOCOL_VERSIONS[-1],
        request_state=request_state,
    )
    return Round(cast("Context[Any, Any]", ctx), IDENTITY)


def state_after_hops(hops: int) -> str:
    """A first-round state that has already been handed back `hops` times."""
    return IDENTITY.layout.encode({}, Trace(hops=hops, visited=[["elsewhere", 2]] * hops), {})


def make_engine(
    executor: Executor, clock: FakeClock, lifecycle: Lifecycle | None = None, **settings: Any
) -> tuple[Engine, WorkerMetrics]:
    metrics = WorkerMetrics()
    engine = Engine(SheddingSettings(**settings), lifecycle or Lifecycle(), metrics, executor=executor, clock=clock)
    return engine, metrics


def complete(result: CallToolResult | InputRequiredResult) -> tuple[dict[str, Any], dict[str, Any]]:
    """The result and the compute `_meta` of a complete result."""
    assert isinstance(result, CallToolResult), f"expected a complete result, got {result}"
    assert result.structured_content is not None
    assert result.meta is not None
    return result.structured_content, result.meta[COMPUTE_META_KEY]


def handed_back(result: CallToolResult | InputRequiredResult) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The round hint, the data to resume from and the (unsealed) state of a hand-back."""
    assert isinstance(result, InputRequiredResult), f"expected a hand-back, got {result}"
    assert result.input_requests is None
    assert result.meta is not None
    assert result.request_state is not None
    return result.meta[ROUND_META_KEY], IDENTITY.layout.decode(result.request_state).data, result.request_state


async def settled(condition: Callable[[], bool], what: str) -> None:
    """Yield to the event loop until `condition` holds (a few turns), never on a timer."""
    for _ in range(TURNS):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"not reached after {TURNS} event loop turns: {what}")


async def test_runs_to_completion_with_exact_step_count() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, metrics = make_engine(executor, clock)
    await engine.start()
    computation = counting(clock)

    result, meta = complete(await engine.run(make_round(), computation, {"n": 7}))

    assert result == {"counted": 7}
    assert result == run_uninterrupted(computation, {"n": 7})[0]
    assert meta == {"steps": 7, "hops": 0, "visited": [["w-test", 2]]}
    assert executor.submitted == 7
    assert metrics.registry.get_sample_value("mrtr_worker_compute_steps_total", {"tool": "count"}) == 7
    assert metrics.registry.get_sample_value("mrtr_worker_computations") == 0, "the slot was not given back"
    await engine.stop()


async def test_zero_step_computation_completes_without_a_step() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock)
    result, meta = complete(await engine.run(make_round(), counting(clock), {"n": 0}))
    assert result == {"counted": 0}
    assert meta["steps"] == 0
    assert executor.submitted == 0


async def test_yields_at_the_time_slice_and_resumes_from_the_state() -> None:
    # 300 ms steps, 1000 ms slice: boundaries at 0, 300, 600, 900, 1200 ms, so 4 steps a round.
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock, min_slice_ms=200, max_slice_ms=1000)
    computation = counting(clock, step_seconds=0.3)

    hint, data, state = handed_back(await engine.run(make_round(), computation, {"n": 10}))
    assert hint == {"reason": "slice", "hops": 1, "retryAfterMs": 0}
    assert data == {"checkpoint": {"n": 10, "i": 4}, "steps": 4}
    assert executor.submitted == 4

    hint, data, state = handed_back(await engine.run(make_round(state), computation, {"n": 10}))
    assert hint == {"reason": "slice", "hops": 2, "retryAfterMs": 0}
    assert data == {"checkpoint": {"n": 10, "i": 8}, "steps": 8}
    assert executor.submitted == 8

    result, meta = complete(await engine.run(make_round(state), computation, {"n": 10}))
    assert result == {"counted": 10}
    assert meta == {"steps": 10, "hops": 2, "visited": [["w-test", 2]] * 3}
    assert executor.submitted == 10, "a resumed round repeated or skipped steps"


async def test_resumes_from_a_checkpoint_without_redoing_steps() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock)
    computation = counting(clock)
    state = IDENTITY.layout.encode(
        {"checkpoint": {"n": 9, "i": 6}, "steps": 6}, Trace(hops=1, visited=[["w-other", 1]]), {}
    )

    result, meta = complete(await engine.run(make_round(state), computation, {"n": 9}))

    assert result == {"counted": 9}
    assert executor.submitted == 3
    assert meta == {"steps": 9, "hops": 1, "visited": [["w-other", 1], ["w-test", 2]]}


async def test_yields_under_pressure_once_the_minimum_slice_has_run() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    engine, _ = make_engine(executor, clock, max_concurrent=1, min_slice_ms=200, max_slice_ms=0)
    computation = counting(clock)

    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 10}))
    await executor.run_step()  # step 1: 100 ms
    second = await executor.next_step()  # step 2 in flight ...
    # ... when a call that may not be shed (a 2025-era request) queues for the slot.
    queued = asyncio.create_task(engine.run(make_round(modern=False), computation, {"n": 1}))
    await settled(lambda: engine._slots.waiting == 1, "the second call queued for the slot")
    second.run()  # 200 ms: the minimum slice has run

    hint, data, _ = handed_back(await asyncio.wait_for(running, WAIT))
    assert hint == {"reason": "pressure", "hops": 1, "retryAfterMs": 0}
    assert data == {"checkpoint": {"n": 10, "i": 2}, "steps": 2}

    await executor.run_step()  # the queued call got the slot and runs its one step
    result, meta = complete(await asyncio.wait_for(queued, WAIT))
    assert result == {"counted": 1}
    assert meta["steps"] == 1
    assert executor.submitted == 3
    assert executor.idle


async def test_no_pressure_before_the_minimum_slice() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    engine, _ = make_engine(executor, clock, max_concurrent=1, min_slice_ms=250, max_slice_ms=0)
    computation = counting(clock)

    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 10}))
    first = await executor.next_step()
    queued = asyncio.create_task(engine.run(make_round(modern=False), computation, {"n": 1}))
    await settled(lambda: engine._slots.waiting == 1, "the second call queued for the slot")
    first.run()  # 100 ms
    await executor.run_step()  # 200 ms: still short of 250, so a third step starts
    await executor.run_step()  # 300 ms

    hint, data, _ = handed_back(await asyncio.wait_for(running, WAIT))
    assert hint["reason"] == "pressure"
    assert data["steps"] == 3
    await executor.run_step()
    complete(await asyncio.wait_for(queued, WAIT))


async def test_drain_yields_at_the_next_boundary() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    lifecycle = Lifecycle()
    engine, _ = make_engine(executor, clock, lifecycle)
    computation = counting(clock)

    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 10}))
    await executor.run_step()
    await executor.run_step()
    third = await executor.next_step()
    lifecycle.drain()  # while step 3 runs: it completes, no fourth starts
    third.run()

    hint, data, _ = handed_back(await asyncio.wait_for(running, WAIT))
    assert hint == {"reason": "drain", "hops": 1, "retryAfterMs": 0}
    assert data == {"checkpoint": {"n": 10, "i": 3}, "steps": 3}
    assert executor.submitted == 3
    assert executor.idle


async def test_draining_instance_hands_a_new_call_back_untouched() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    lifecycle = Lifecycle()
    lifecycle.drain()
    engine, _ = make_engine(executor, clock, lifecycle)

    hint, data, _ = handed_back(await engine.run(make_round(), counting(clock), {"n": 5}))

    assert hint == {"reason": "drain", "hops": 1, "retryAfterMs": 0}
    assert data == {"checkpoint": {"n": 5, "i": 0}, "steps": 0}
    assert executor.submitted == 0


async def test_a_2025_era_call_is_never_handed_back_even_by_a_drain() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    lifecycle = Lifecycle()
    lifecycle.drain()
    engine, _ = make_engine(executor, clock, lifecycle, max_slice_ms=300)

    result, meta = complete(await engine.run(make_round(modern=False), counting(clock), {"n": 12}))

    assert result == {"counted": 12}
    assert meta["steps"] == 12
    assert executor.submitted == 12


async def test_admission_refuses_a_new_call_when_full_but_not_a_prioritized_one() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    engine, _ = make_engine(executor, clock, max_concurrent=1, min_slice_ms=10_000, max_slice_ms=0)
    computation = counting(clock)
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 2}))
    first = await executor.next_step()

    hint, data, _ = handed_back(await engine.run(make_round(state_after_hops(1)), computation, {"n": 4}))
    assert hint == {"reason": "admission", "hops": 2, "retryAfterMs": 50}
    assert data == {"checkpoint": {"n": 4, "i": 0}, "steps": 0, "refused": True}

    # After priority_after_hops (4) hand-backs the call queues for the slot instead, and is not shed.
    prioritized = asyncio.create_task(engine.run(make_round(state_after_hops(4)), computation, {"n": 1}))
    await settled(lambda: engine._slots.waiting == 1, "the prioritized call queued for the slot")
    first.run()
    await executor.run_step()
    complete(await asyncio.wait_for(running, WAIT))  # min slice 10 s: no pressure yet
    await executor.run_step()
    result, meta = complete(await asyncio.wait_for(prioritized, WAIT))
    assert result == {"counted": 1}
    assert meta["hops"] == 4
    assert executor.idle


async def test_prioritized_call_is_not_shed_by_slice_or_pressure() -> None:
    clock, executor = FakeClock(), InlineExecutor()
    engine, _ = make_engine(executor, clock, max_concurrent=1, min_slice_ms=0, max_slice_ms=100)

    result, meta = complete(await engine.run(make_round(state_after_hops(4)), counting(clock), {"n": 30}))

    assert result == {"counted": 30}
    assert meta["steps"] == 30
    assert meta["hops"] == 4


async def test_shedding_off_queues_instead_of_refusing() -> None:
    clock, executor = FakeClock(), ManualExecutor()
    engine, _ = make_engine(executor, clock, enabled=False, max_concurrent=1, min_slice_ms=0, max_slice_ms=100)
    computation = counting(clock)
    running = asyncio.create_task(engine.run(make_round(), computation, {"n": 3}))
    first = await executor.next_step()
    queued = asyncio.create_task(engine.run(make_round(), computation, {"n": 1}))
    await settled(lambda: engine._slots.waiting == 1, "the new call queued for the slot")
    first.run()
    for _ in range(2):
        await executor.run_step()
    result, meta = complete(await asyncio.wait_for(running, WAIT))  # no pressure, no slice
    assert (result, meta["steps"]) == ({"counted": 3}, 3)
    await executor.run_step()
    complete(await asyncio.wait_for(queued, WAIT))
