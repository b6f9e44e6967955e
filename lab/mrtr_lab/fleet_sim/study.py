"""The study: fleets of 10 to 1,000 instances at a given load, in four scenarios, under each strategy.

Each instance has its own cores (as many as its compute slots, two by
default) and the calibrated step times; the client and the proxy are
elsewhere, so a hop costs their measured CPU as time. Calls are the short
why-shed call (20 steps), arriving as a Poisson stream at `load` times what
the instances in rotation can step (a quarter-speed instance counts for a
quarter).

* `slow`: 5 % of the instances (at least one) at a quarter speed throughout;
* `gc`: every instance pauses now and then (`GC_EVERY` s apart on average,
  `GC_PAUSE` s long), answering nothing meanwhile, as a long garbage
  collection does; the proxy's health checks see it as the real one would;
* `upgrade`: every instance replaced, in batches of 10 %: a batch of new
  ones starts and joins, then as many old ones leave the strategy's way;
* `scale-out`: the arrival rate is `load` times what the fleet can do after
  20 % more instances join, so at 0.9 and 0.95 the fleet is overloaded for
  the `SCALE_WARMUP` seconds before they come;
* `slow-tasks`: `slow`'s fleet, the same work created as tasks (`tasks.py`:
  one Redis, slices pulled by the workers' runners, each created task
  followed by pushed changes), under the task strategies only.

The steady scenarios warm up for `WARMUP` s, then count the calls that
start in a window sized for the asked number of calls; the other two count
the calls that start from the event until it is over (plus `SCALE_AFTER`
s for the scale-out), repeating the whole run with new seeds until the
asked number of calls is reached. Every counted call runs to its end.
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import simpy

from mrtr_lab._why_shed.accounting import Sample, seconds_to_share
from mrtr_lab.fleet_sim.client import Call, Hedging
from mrtr_lab.fleet_sim.fleet import Fleet, started
from mrtr_lab.fleet_sim.instance import Instance
from mrtr_lab.fleet_sim.metrics import Figures
from mrtr_lab.fleet_sim.model import Model, step_work
from mrtr_lab.fleet_sim.strategies import GRACE_SECONDS, Strategy
from mrtr_lab.fleet_sim.tasks import Task, TaskFleet
from mrtr_lab.fleet_sim.workload import Calls, Switch, open_loop

SCENARIOS = {
    "slow": "5 % of the instances at a quarter speed",
    "gc": "pauses like a long garbage collection",
    "upgrade": "rolling upgrade in batches of 10 %",
    "scale-out": "scale-out by 20 % under load",
    "slow-tasks": "5 % at a quarter speed, the work as task slices",
}
TASK_SCENARIOS = ("slow-tasks",)
"""Scenarios whose work runs as task slices: run under the task strategies only (and those only there)."""
STEPS = 20
"""Steps per call: the why-shed call, `count_primes(100,000,000)`."""
SLOW_SHARE, SLOW_SPEED = 0.05, 0.25
GC_EVERY, GC_PAUSE = 30.0, 2.0
"""A pause every 30 s per instance on average, 2 s long: longer than the proxy's 1 s probe timeout, so it takes the
instance out of rotation, and long enough for the second failed probe to abandon its requests (504)."""
BATCH = 0.10
SCALE_BY, SCALE_WARMUP, SCALE_AFTER = 0.20, 10.0, 30.0
WARMUP = 10.0
"""Seconds before counting starts in the steady scenarios: the slow instances learn their standing."""
PATIENCE = 60.0
"""Seconds the counted calls get to end after the counting stops; one still running then is reported unfinished
(with its time so far in the percentiles, so a p99.9 with unfinished calls is a lower bound)."""
MAX_RUNS = 200
"""Runs of a transient scenario at most, whatever the asked number of calls."""
SHARE_SAMPLE = 0.25


@dataclass(frozen=True)
class Cell:
    scenario: str
    size: int
    load: float
    strategy: Strategy


@dataclass(frozen=True)
class Result:
    cell: Cell
    figures: Figures
    runs: int
    event_seconds: float | None = None
    """`upgrade`: first batch started to last old instance gone (mean over runs); `scale-out`: until the new
    instances carried their share (mean over the runs where they did)."""
    never: int = 0
    """`scale-out`: runs in which the new instances never carried their share."""


def seed_of(cell: Cell, run: int, base: int) -> int:
    """A seed that depends on the cell and the run only, so any subset of cells reproduces the same figures."""
    return zlib.crc32(f"{base}:{cell.scenario}:{cell.size}:{cell.load}:{cell.strategy.key}:{run}".encode())


def run_cell(model: Model, cell: Cell, calls: int, seed: int = 1) -> Result:
    """One cell: as many runs as its scenario needs for `calls` counted calls."""
    counted: list[Call] = []
    events: list[float | None] = []
    runs = 0
    steady = cell.scenario in ("slow", "gc", "slow-tasks")
    while len(counted) < calls and runs < (1 if steady else MAX_RUNS):
        run = _Run(model, cell, seed_of(cell, runs, seed), calls - len(counted))
        counted += run.go()
        events.append(run.event)
        runs += 1
    happened = [e for e in events if e is not None]
    event = sum(happened) / len(happened) if happened else None
    never = sum(e is None for e in events) if cell.scenario == "scale-out" else 0
    return Result(cell, Figures.of(counted), runs, event, never)


class _Run:
    def __init__(self, model: Model, cell: Cell, seed: int, wanted: int) -> None:
        self.model, self.cell, self.wanted = model, cell, wanted
        self.env = simpy.Environment()
        self.rng = random.Random(seed)
        strategy = cell.strategy
        hedging = Hedging() if strategy.hedge else None
        self.fleet = Fleet(self.env, model, strategy.settings, strategy.balance, self.rng, hedging=hedging)
        self.slots = strategy.settings.max_concurrent
        self.work = step_work(model.step_mean, model.step_cv, self.rng, model.worker_step)
        self.call_work = STEPS * (model.step_mean + model.worker_step)
        self.calls, self.switch = Calls(), Switch(self.env)
        self.tasks: TaskFleet | None = None
        if strategy.tasks:
            if model.tasks is None:
                raise ValueError("the model has no task costs: calibrate.py --task-cost")
            self.tasks = TaskFleet(self.fleet, model.tasks, self.rng)
        self.event: float | None = None
        self.capacity = 0.0
        """Calls per second the fleet can step (at full load)."""

    def new_call(self, now: float) -> Call:
        return Task(STEPS, self.work, now) if self.tasks is not None else Call(STEPS, self.work, now)

    def rate(self) -> float:
        return self.cell.load * self.capacity

    def go(self) -> list[Call]:
        scenario: Callable[[], Generator[simpy.Event, Any, None]] = {
            "slow": self._slow,
            "gc": self._gc,
            "upgrade": self._upgrade,
            "scale-out": self._scale_out,
            "slow-tasks": self._slow,
        }[self.cell.scenario]
        finished = self.env.process(scenario())
        self.env.run(until=finished)
        self.switch.stopped = True
        return self.calls.measured

    def _instances(self, count: int, slow: int = 0) -> list[Instance]:
        picked = set(self.rng.sample(range(count), slow))
        add = self.tasks.add if self.tasks is not None else self.fleet.add
        made = [add(speed=SLOW_SPEED if i in picked else 1.0) for i in range(count)]
        self.capacity = sum(i.speed for i in made) * self.slots / self.call_work
        return made

    def _load(self, measure_from: float, measure_until: float) -> None:
        self.switch.measure_from, self.switch.measure_until = measure_from, measure_until
        client = self.tasks.client if self.tasks is not None else self.fleet.client
        open_loop(self.env, client, self.rate, self.new_call, self.switch, self.calls, self.rng)

    def _window(self) -> float:
        return self.wanted / self.rate()

    def _all_done(self) -> Generator[simpy.Event, Any, None]:
        """Until every counted call has ended (the load goes on meanwhile, as it would), or `PATIENCE` is over."""
        give_up = self.env.now + PATIENCE
        while self.env.now < give_up and any(c.ended is None and not c.failed for c in self.calls.measured):
            yield self.env.timeout(1.0)
        for call in self.calls.measured:
            call.cut_at = self.env.now

    def _slow(self) -> Generator[simpy.Event, Any, None]:
        size = self.cell.size
        self._instances(size, slow=max(1, round(SLOW_SHARE * size)))
        yield from self._steady()

    def _gc(self) -> Generator[simpy.Event, Any, None]:
        for instance in self._instances(self.cell.size):
            self.env.process(self.fleet.pauses(instance, GC_EVERY, GC_PAUSE, until=math.inf))
        yield from self._steady()

    def _steady(self) -> Generator[simpy.Event, Any, None]:
        self._load(WARMUP, WARMUP + self._window())
        yield self.env.timeout(WARMUP + self._window())
        yield from self._all_done()

    def _upgrade(self) -> Generator[simpy.Event, Any, None]:
        old = self._instances(self.cell.size)
        batch = max(1, math.ceil(BATCH * len(old)))
        self._load(WARMUP / 2, math.inf)
        yield self.env.timeout(WARMUP / 2)
        started = self.env.now
        for first in range(0, len(old), batch):
            leaving = old[first : first + batch]
            yield self.env.all_of([self.env.process(self.fleet.start(version=2)) for _ in leaving])
            yield self.env.all_of([self.env.process(self._leave(instance)) for instance in leaving])
        self.event = self.env.now - started
        self.switch.measure_until = self.env.now
        yield from self._all_done()

    def _leave(self, instance: Instance) -> Generator[simpy.Event, Any, None]:
        if self.cell.strategy.shedding:
            yield from self.fleet.drain(instance)
        else:
            yield from self.fleet.leave_waiting(instance, GRACE_SECONDS)

    def _scale_out(self) -> Generator[simpy.Event, Any, None]:
        size = self.cell.size
        added = max(1, round(SCALE_BY * size))
        self._instances(size)
        self.capacity = (size + added) * self.slots / self.call_work  # the load is of the fleet after the scale-out
        samples: list[Sample] = []
        self.env.process(self._sample(samples))
        self._load(0.0, SCALE_WARMUP + SCALE_AFTER)
        yield self.env.timeout(SCALE_WARMUP)
        starting = [self.env.process(self.fleet.start()) for _ in range(added)]
        yield self.env.all_of(starting)
        added_at = self.env.now
        yield self.env.timeout(max(0.0, SCALE_WARMUP + SCALE_AFTER - self.env.now))
        new = {started(process).name for process in starting}
        self.event = seconds_to_share(samples, new, added_at, fair_share=added / (size + added))
        yield from self._all_done()

    def _sample(self, samples: list[Sample]) -> Generator[simpy.Event, Any, None]:
        while not self.switch.stopped:
            samples.append(Sample(self.env.now, {i.name: float(i.steps) for i in self.fleet.live}))
            yield self.env.timeout(SHARE_SAMPLE)
