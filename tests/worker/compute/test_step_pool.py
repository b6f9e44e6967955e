"""The step pool: steps in spawned processes, answered through the event loop, no helper threads."""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
import time
from collections.abc import Awaitable, Callable
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from mrtr_worker.compute import primes
from mrtr_worker.compute.step_pool import StepNotSendable, StepPool

pytestmark = pytest.mark.slow


def _fails(state: object) -> object:
    raise ValueError(f"no step from {state!r}")


async def _with_pool(size: int, body: Callable[[StepPool], Awaitable[None]]) -> None:
    pool = StepPool(size)
    await pool.start()
    try:
        await body(pool)
    finally:
        await pool.stop()


def test_steps_run_queue_when_busy_and_answer_in_order() -> None:
    start = primes.initial({"limit": 1_000_000, "segment": 100_000})
    expected = primes.step(start)

    async def body(pool: StepPool) -> None:
        # Three steps on one process: two wait their turn, and each gets its own answer.
        answers = await asyncio.gather(*(pool.run(primes.step, start) for _ in range(3)))
        assert answers == [expected] * 3
        assert await pool.run(primes.step, expected) == primes.step(expected)

    asyncio.run(_with_pool(1, body))


def test_a_step_error_reaches_the_caller_and_the_process_goes_on() -> None:
    async def body(pool: StepPool) -> None:
        with pytest.raises(ValueError, match="no step from 7"):
            await pool.run(_fails, 7)
        assert await pool.run(abs, -3) == 3

    asyncio.run(_with_pool(1, body))


def test_a_cancelled_step_leaves_the_process_to_the_next() -> None:
    start = primes.initial({"limit": 1_000_000, "segment": 100_000})

    async def body(pool: StepPool) -> None:
        first = pool.run(primes.step, start)
        queued = pool.run(primes.step, start)
        queued.cancel()  # its caller gave up while it waited: it never runs
        first.cancel()  # its caller gave up while it ran: the answer is dropped
        assert await pool.run(abs, -5) == 5

    asyncio.run(_with_pool(1, body))


def test_a_dead_process_breaks_the_pool_and_stop_reaps_the_rest() -> None:
    async def body(pool: StepPool) -> None:
        members = pool._processes
        assert len(members) == 2
        assert all(m.process.is_alive() for m in members)
        pid = members[0].process.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(BrokenProcessPool):
            await asyncio.gather(*(pool.run(time.sleep, 5) for _ in range(2)))
        with pytest.raises(BrokenProcessPool):
            await pool.run(abs, 1)

    asyncio.run(_with_pool(2, body))


def test_a_step_that_cannot_be_sent_fails_its_call_alone() -> None:
    def nested(state: object) -> object:
        return state

    async def body(pool: StepPool) -> None:
        for step in (nested, lambda state: state):
            with pytest.raises(StepNotSendable, match="module-level function"):
                await pool.run(step, 1)
        assert await pool.run(abs, -2) == 2

    asyncio.run(_with_pool(1, body))


def test_a_step_whose_module_the_processes_cannot_import_fails_and_the_process_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack installed where the worker sees it but its step processes do not: an error, not a broken pool."""

    async def body(pool: StepPool) -> None:
        (tmp_path / "late_pack_steps.py").write_text("def step(state):\n    return state + 1\n")
        monkeypatch.syspath_prepend(str(tmp_path))  # after the processes started: they never see it
        module = importlib.import_module("late_pack_steps")
        assert module.step(1) == 2
        with pytest.raises(ModuleNotFoundError, match="late_pack_steps"):
            await pool.run(module.step, 1)
        assert await pool.run(abs, -4) == 4

    asyncio.run(_with_pool(1, body))
