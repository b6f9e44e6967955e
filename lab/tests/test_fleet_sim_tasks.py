"""The fleet simulator's task half (`lab/mrtr_lab/fleet_sim/tasks.py`): the pulled queue, a small task cell, and the
straggler rule's effect on where slices run, with the committed calibration's task costs. In process, seconds."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace
from typing import Any

import simpy

from mrtr_lab.fleet_sim.calibrate import CALIBRATION, load
from mrtr_lab.fleet_sim.model import Model
from mrtr_lab.fleet_sim.replay import replay
from mrtr_lab.fleet_sim.replay_tasks import replay_tasks
from mrtr_lab.fleet_sim.strategies import STRATEGIES
from mrtr_lab.fleet_sim.study import Cell, run_cell
from mrtr_lab.fleet_sim.tasks import SliceQueue, Task

TASKS = 150


def _task(env: simpy.Environment) -> Task:
    return Task(20, lambda: 0.01, env.now)


def test_the_queue_serves_the_reader_blocked_longest_then_keeps_slices_in_order() -> None:
    env = simpy.Environment()
    queue = SliceQueue(env)
    got: dict[str, Task | None] = {}

    def reader(name: str, delay: float, block_ms: float) -> Generator[simpy.Event, Any, None]:
        yield env.timeout(delay)
        got[name] = yield from queue.take(block_ms)

    first, second = _task(env), _task(env)
    env.process(reader("early", 0.0, 500))
    env.process(reader("late", 0.1, 500))
    env.process(reader("gives up", 0.0, 1))

    def add() -> Generator[simpy.Event, Any, None]:
        yield env.timeout(0.2)
        queue.add(first)
        queue.add(second)
        queue.add(_task(env))

    env.process(add())
    env.run(until=0.3)
    assert got == {"gives up": None, "early": first, "late": second}
    assert len(queue.waiting) == 1
    assert queue.oldest_age_ms() in (99, 100)  # whole milliseconds, as a stream id has them


def test_a_small_task_cell_completes_every_task_in_sane_times() -> None:
    cal = load(CALIBRATION)
    assert cal.tasks is not None, "calibration.json holds the task half's costs"
    model = Model.from_calibration(cal)
    result = run_cell(model, Cell("slow-tasks", 10, 0.7, STRATEGIES["tasks-rule-on"]), TASKS)
    f = result.figures
    assert f.calls > TASKS * 0.8  # the tasks that arrived in a window sized for about that many
    assert f.unfinished == 0
    assert f.lost_steps == 0, "a task's steps all count: no slice is lost when nothing dies"
    assert 20 * model.step_mean < f.p50 < f.p99 < 60


def test_the_straggler_rule_keeps_slices_off_the_slow_worker() -> None:
    """The straggler-tasks benchmark's slow rows: with the rule off, about a quarter of all slices run on the
    quarter-speed worker (it takes its share of the queue); with it on, far fewer."""
    cal = load(CALIBRATION)
    slow = [r for r in cal.reference if r.scenario == "tasks-a"]
    on = next(r for r in slow if r.strategy == "rule-on")
    off = next(r for r in slow if r.strategy == "rule-off")
    with_rule, without = replay_tasks(cal, on, seed=1), replay_tasks(cal, off, seed=1)
    assert with_rule.on_slow is not None
    assert without.on_slow is not None
    assert without.on_slow > 2 * with_rule.on_slow
    assert without.p99 > with_rule.p99
    assert replay(cal, replace(off, stopped_share=0.0), seed=1).p99 < without.p99, "the throttle is what slows it"
