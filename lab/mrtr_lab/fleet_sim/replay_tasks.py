"""The straggler benchmark's task rows (`lab/mrtr_lab/straggler.py --tasks`), replayed in the model.

What the real benchmark does (`_straggler_tasks.py`, `straggler.main_tasks`):
three workers, their proxy and one Redis on the machine's cores; 6
closed-loop callers each create a `count_primes(100,000,000)` task (20
steps) and follow it to its result by pushed changes, for 45 s a row, tasks
done counted within the window, percentiles over every task. One cluster
with the straggler rule on runs the healthy row and then the slow row (its
workers' standing already knows the healthy pace); another, with
`MRTR_WORKER_STRAGGLER_RATIO=0`, runs the slow row alone. The slow worker is
stopped and resumed on the throttle's duty cycle. The replay does the same
on the model's shared cores, with the task runner's rules (`tasks.py`).
"""

from __future__ import annotations

import random
from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import Any

import simpy

from mrtr_lab.fleet_sim.calibrate import Calibration
from mrtr_lab.fleet_sim.client import Call
from mrtr_lab.fleet_sim.fleet import Fleet
from mrtr_lab.fleet_sim.metrics import percentile
from mrtr_lab.fleet_sim.model import Model, step_work
from mrtr_lab.fleet_sim.reference import Reference
from mrtr_lab.fleet_sim.tasks import Task, TaskFleet, slices_on
from mrtr_lab.fleet_sim.workload import Calls, Switch, closed_loop
from mrtr_lb.balancing import Balance
from mrtr_worker.compute.policy import SheddingSettings

TASK_SCENARIOS = ("tasks", "tasks-a")
"""The task rows: all healthy, and one at a quarter speed."""
STEPS = 20
CALLERS = 6
WORKERS = 3
STOPPED = 0.75


@dataclass(frozen=True)
class TaskReplayed:
    completed: int
    p50: float
    p99: float
    on_slow: float | None
    """Share of the slices begun on the slow worker."""
    moves: int
    slices_p50: float


def settings_of(strategy: str) -> SheddingSettings:
    """`rule-on`: the worker's defaults; `rule-off`: `MRTR_WORKER_STRAGGLER_RATIO=0`."""
    return SheddingSettings() if strategy == "rule-on" else replace(SheddingSettings(), straggler_ratio=0)


def replay_tasks(cal: Calibration, ref: Reference, seed: int) -> TaskReplayed:
    if cal.tasks is None:
        raise ValueError("calibration.json has no task costs: run calibrate.py --task-cost")
    env = simpy.Environment()
    rng = random.Random(seed)
    model = Model.from_calibration(cal)
    cores = cal.cores * (1 - ref.others_share)
    fleet = Fleet(env, model, settings_of(ref.strategy), Balance.ROUND_ROBIN, rng, shared_cores=cores)
    tasks = TaskFleet(fleet, cal.tasks, rng)
    work = step_work(model.crowded_step_mean, model.step_cv, rng, model.worker_step)

    def new_task(now: float) -> Call:
        return Task(STEPS, work, now)

    calls, switch = Calls(), Switch(env)
    window: dict[str, float] = {}
    env.process(_rows(tasks, ref, new_task, calls, switch, window))
    env.process(fleet.uneven(lambda: switch.over))
    env.run()
    done = [c for c in calls.all if c.ended is not None]
    seconds = [c.seconds for c in done]
    end = window["start"] + (ref.duration or 45.0)
    counted = [c for c in done if isinstance(c, Task)]
    slow = tasks.runners[0].name if ref.scenario == "tasks-a" else None
    on, total = slices_on(counted, slow) if slow is not None else (0, 0)
    return TaskReplayed(
        completed=sum(c.ended is not None and c.ended <= end for c in calls.all),
        p50=percentile(seconds, 50),
        p99=percentile(seconds, 99),
        on_slow=on / total if total else None,
        moves=sum(t.moves for t in counted),
        slices_p50=percentile([float(len(t.visited)) for t in counted], 50),
    )


def _rows(
    tasks: TaskFleet, ref: Reference, new_task: Any, calls: Calls, switch: Switch, window: dict[str, float]
) -> Generator[simpy.Event, Any, None]:
    fleet = tasks.fleet
    env = fleet.env
    workers = [tasks.add() for _ in range(WORKERS)]
    for what, seconds in ref.before:  # the healthy row before, on the same cluster: uncounted
        if what != "healthy":
            raise ValueError(f"a task row replays only healthy rows before it, not {what!r}")
        before = Switch(env)
        warming = closed_loop(env, tasks.client, CALLERS, new_task, before, Calls())
        yield env.timeout(seconds)
        before.stopped = True
        yield env.all_of(warming)
    window["start"] = env.now
    if ref.scenario == "tasks-a":
        running = 1 - (ref.stopped_share if ref.stopped_share is not None else STOPPED)
        env.process(fleet.throttle(workers[0], running, lambda: switch.over))
    callers = closed_loop(env, tasks.client, CALLERS, new_task, switch, calls)
    yield env.timeout(ref.duration or 45.0)
    switch.stopped = True
    yield env.all_of(callers)
    switch.over = True
    for instance in workers:  # the runners' loops end with their instances
        instance.alive = False
