"""Toxic jobs for the chaos run (the `chaos` pack's tools): each must end its task `failed`, clearly, once.

docket's chaos driver queues a task that calls `sys.exit(42)`; ours queues
that one and two more: one whose step raises, and one that never finishes
and must be stopped by the run-time limit (its own, 3 s, tighter than the
fleet's `MRTR_WORKER_TASK_MAX_RUN_MS`; the runner applies the tighter).
None may crash the worker that runs it, loop through redeliveries, or take
a compute slot: their steps wait on the event loop, as the conformance jobs
do. A job that calls `sys.exit` has no place in a product: these live in the
test packs' package, installed only where tests and chaos runs need them.
"""

from __future__ import annotations

import asyncio
import sys

from mrtr_worker.plugin import Job, State, StepRunner, text_result

STEP_MS = 50
"""One step of a toxic job: a short wait, so each behaves like work in progress before it misbehaves."""

RAISES = "chaos_raise"
EXITS = "chaos_exit"
NEVER_ENDS = "chaos_forever"


async def _raise(state: State, runner: StepRunner) -> State:
    await asyncio.sleep(STEP_MS / 1000)
    raise RuntimeError("chaos_raise always raises")


async def _exit(state: State, runner: StepRunner) -> State:
    await asyncio.sleep(STEP_MS / 1000)
    sys.exit(42)


async def _spin(state: State, runner: StepRunner) -> State:
    await asyncio.sleep(STEP_MS / 1000)
    return {**state, "spins": int(state.get("spins", 0)) + 1}


def _never_done(state: State) -> bool:
    return False


def _unreachable(state: State) -> dict[str, object]:
    return text_result("unreachable: a toxic job never completes", error=True)


RAISING_JOB = Job(RAISES, lambda a: {}, _raise, _never_done, _unreachable)
EXITING_JOB = Job(EXITS, lambda a: {}, _exit, _never_done, _unreachable)
ENDLESS_RUN_MS = 3_000
"""The endless job's own run-time limit: it fails after 3 s of slices, whatever the fleet's (an hour by default)."""

ENDLESS_JOB = Job(NEVER_ENDS, lambda a: {"spins": 0}, _spin, _never_done, _unreachable, max_run_ms=ENDLESS_RUN_MS)

TOXIC_JOBS = (RAISING_JOB, EXITING_JOB, ENDLESS_JOB)
