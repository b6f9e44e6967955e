"""The real three-worker benchmark, replayed in the model: the cells `calibrate.py` measured, step for step.

Each scenario does what `lab/mrtr_lab/_why_shed/scenarios.py` does to the real
cluster, at the same sizes (callers, windows, calls), on one machine of the
real one's cores less the share other processes took during that real cell:

* healthy: three workers, closed-loop callers of the short call for the window;
* (a) the same with one worker stopped and resumed on the throttle's duty
  cycle (running the share of the time it really ran);
* (b) long calls, one caller per worker; once every worker has a call, each
  old worker in turn is replaced (a v2 worker starts and joins, then the old
  one leaves the strategy's way), then the load runs to the end of the window
  and until the calls the upgrade caught are done;
* (c) two workers overloaded, two more started after the warm-up, then the
  window; when the new ones carry their share is computed by the real
  benchmark's own function (`_why_shed.accounting.seconds_to_share`) on step
  counts sampled as the real one samples them.

A cell that followed others on the same workers (the straggler benchmark's
slow row, every balance cell after the first) replays them first, uncounted
(`Reference.before`).

The why-shed runs read every worker's step counter every 0.25 s, and a
leaving worker's every 50 ms: each scrape costs the worker's main process
and the benchmark's process CPU on the same cores (`scrape_cost.py`), which
the replay pays as they did (the straggler benchmark's cells scrape nothing).
"""

from __future__ import annotations

import random
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import simpy

from mrtr_lab._balance_order import IDLE
from mrtr_lab._balance_setups import setup_of
from mrtr_lab._why_shed.accounting import Sample, seconds_to_share
from mrtr_lab._why_shed.fleet import IDLE_POLL
from mrtr_lab.fleet_sim.calibrate import Calibration
from mrtr_lab.fleet_sim.client import Call
from mrtr_lab.fleet_sim.fleet import Fleet, started
from mrtr_lab.fleet_sim.instance import Instance
from mrtr_lab.fleet_sim.metrics import percentile
from mrtr_lab.fleet_sim.model import Model, step_work
from mrtr_lab.fleet_sim.reference import Reference
from mrtr_lab.fleet_sim.replay_tasks import TASK_SCENARIOS, replay_tasks
from mrtr_lab.fleet_sim.workload import Calls, Switch, closed_loop
from mrtr_lb.balancing import Balance
from mrtr_worker.compute.policy import SheddingSettings

SAMPLE_EVERY = 0.25
"""The real benchmark scrapes every worker's step counter this often (`_why_shed.fleet.Steps`)."""
STATE = 0.1
"""How often the real upgrade looks whether every worker has a call (`_why_shed.scenarios._busy`)."""


@dataclass(frozen=True)
class Replayed:
    """One cell in the model: what the real `Reference` reports, computed the same way."""

    scenario: str
    strategy: str
    completed: int
    p50: float
    p99: float
    lost: float
    upgrade_seconds: float | None = None
    leaving_seconds: float | None = None
    share_seconds: float | None = None
    on_slow: float | None = None
    """Task cells: the share of the slices begun on the slow worker."""
    seconds: tuple[float, ...] = ()
    """Every completed call's seconds (a run of several rounds pools them: the balance table)."""


def settings_of(strategy: str, *, step_aside: bool = False) -> SheddingSettings:
    """The workers' settings of a real cell: the defaults ("ours", with the balance setup's step-aside switch)
    or shedding off."""
    return SheddingSettings(step_aside=step_aside) if strategy == "ours" else SheddingSettings(enabled=False)


def replay(cal: Calibration, ref: Reference, seed: int) -> Replayed:
    """The model's run of the real cell `ref`."""
    if ref.scenario in TASK_SCENARIOS:
        tasks = replay_tasks(cal, ref, seed)
        return Replayed(ref.scenario, ref.strategy, tasks.completed, tasks.p50, tasks.p99, 0.0, on_slow=tasks.on_slow)
    env = simpy.Environment()
    rng = random.Random(seed)
    model = Model.from_calibration(cal)
    cores = cal.cores * (1 - ref.others_share)
    setup = setup_of(ref.balance)
    settings = settings_of(ref.strategy, step_aside=setup.step_aside)
    fleet = Fleet(env, model, settings, Balance(setup.balance), rng, shared_cores=cores)
    sizes = dict(cal.sizes)
    if ref.duration is not None:
        sizes["duration"] = ref.duration
    long = ref.scenario == "b"
    steps = sizes["long_steps"] if long else sizes["short_steps"]
    mean = model.crowded_long_step_mean if long else model.crowded_step_mean
    work = step_work(mean, model.step_cv, rng, model.worker_step)

    def new_call(now: float) -> Call:
        return Call(steps, work, now)

    calls, switch = Calls(), Switch(env)
    result: dict[str, Any] = {"samples": []}
    scraper = fleet.shared.group("scraper") if fleet.shared is not None else None
    if ref.scraped and cal.scrape is not None and scraper is not None:
        result["scrape"] = (cal.scrape, scraper)
    env.process(_sample(fleet, result, switch))
    env.process(fleet.uneven(lambda: switch.over))
    scenario = {"healthy": _steady, "a": _steady, "b": _upgrade, "c": _scale_out}[ref.scenario]
    env.process(scenario(fleet, ref, sizes, new_call, calls, switch, result))
    env.run()
    seconds = [c.seconds for c in calls.all if c.ended is not None]
    completed = len(seconds)
    if ref.in_window:  # the straggler benchmark counts the calls done within its window only
        end = result.get("window_start", 0.0) + sizes["duration"]
        completed = sum(c.ended is not None and c.ended <= end for c in calls.all)
    return Replayed(
        ref.scenario,
        ref.strategy,
        completed,
        percentile(seconds, 50),
        percentile(seconds, 99),
        fleet.executed - result.get("executed_before", 0) - len(seconds) * steps,
        result.get("upgrade"),
        result.get("leaving"),
        result.get("share"),
        seconds=tuple(seconds),
    )


def first_workers(fleet: Fleet, ref: Reference, count: int) -> list[Instance]:
    """The cell's first workers, in rotation as the real proxy had them when the run began: in its pool's order,
    its round robin turned to the one it sent the next request to. Where the run did not record them, both
    are drawn: a real run begins wherever the cells before it left the proxy.

    Why it matters: which old worker a call restarted during an upgrade lands on (and so whether that worker
    must wait for a whole call more before it leaves) follows from where the round robin stood.
    """
    workers = [fleet.add(join=False) for _ in range(count)]
    order = ref.pool_order if _recorded(ref, count) and ref.pool_order is not None else None
    for place in order or fleet.rng.sample(range(count), count):
        fleet.proxy.join(workers[place], rebalance=False)
    turn(fleet, ref, workers)
    return workers


def turn(fleet: Fleet, ref: Reference, workers: list[Instance]) -> None:
    """The round robin to the worker the real one was to pick next as the cell began (drawn if not recorded)."""
    if fleet.proxy.pool.picker is None:
        known = _recorded(ref, len(workers)) and ref.next_pick is not None
        upcoming = ref.next_pick if known and ref.next_pick is not None else fleet.rng.randrange(len(workers))
        fleet.proxy.turn_to(workers[upcoming])


def _recorded(ref: Reference, count: int) -> bool:
    return ref.pool_order is not None and sorted(ref.pool_order) == list(range(count))


def _before(
    fleet: Fleet, ref: Reference, workers: list[Instance], running: float, callers: int, new_call: Any
) -> Generator[simpy.Event, Any, None]:
    """What the same workers served before the cell (`Reference.before`), uncounted: each worker's standing
    carries it into the cell, the healthy pace it learned or that it was slow."""
    for what, seconds in ref.before:
        if what == IDLE:
            yield fleet.env.timeout(seconds)
        else:
            yield from _uncounted(fleet, seconds, callers, new_call, workers[0] if what == "a" else None, running)


def _uncounted(
    fleet: Fleet, seconds: float, callers: int, new_call: Any, slow: Instance | None, running: float
) -> Generator[simpy.Event, Any, None]:
    """`seconds` of closed-loop load whose calls count nowhere; `slow` (if any) on the throttle's duty cycle."""
    env = fleet.env
    switch = Switch(env)
    if slow is not None:
        env.process(fleet.throttle(slow, running, lambda: switch.over))
    loop = closed_loop(env, fleet.client, callers, new_call, switch, Calls())
    yield env.timeout(seconds)
    switch.stopped = True
    yield env.all_of(loop)
    switch.over = True


def _steady(
    fleet: Fleet,
    ref: Reference,
    sizes: dict[str, Any],
    new_call: Any,
    calls: Calls,
    switch: Switch,
    result: dict[str, Any],
) -> Generator[simpy.Event, Any, None]:
    env = fleet.env
    workers = first_workers(fleet, ref, 3)
    running = 1 - (ref.stopped_share if ref.stopped_share is not None else 0.75)
    if ref.before:
        yield from _before(fleet, ref, workers, running, sizes["callers"], new_call)
        if _recorded(ref, len(workers)):  # else the round robin stays where the cells before left it
            turn(fleet, ref, workers)
    result["window_start"], result["executed_before"] = env.now, fleet.executed
    if ref.scenario == "a":
        env.process(fleet.throttle(workers[0], running, lambda: switch.over))
    callers = closed_loop(env, fleet.client, sizes["callers"], new_call, switch, calls)
    yield env.timeout(sizes["duration"])
    switch.stopped = True
    yield env.all_of(callers)
    switch.over = True


def _upgrade(
    fleet: Fleet,
    ref: Reference,
    sizes: dict[str, Any],
    new_call: Any,
    calls: Calls,
    switch: Switch,
    result: dict[str, Any],
) -> Generator[simpy.Event, Any, None]:
    env = fleet.env
    old = first_workers(fleet, ref, 3)
    callers = closed_loop(env, fleet.client, sizes["long_callers"], new_call, switch, calls)
    while sum(worker.busy > 0 for worker in old) < min(len(old), sizes["long_callers"]):
        yield env.timeout(STATE)
    started = env.now
    caught = [c for c in calls.all if c.ended is None]
    leaving = 0.0
    for worker in old:
        yield env.process(fleet.start(version=2))
        began = env.now
        polling = env.process(_poll_idle(fleet, worker, result))
        if ref.strategy == "ours":
            yield env.process(fleet.drain(worker))
        else:
            grace = sizes["grace"] if ref.strategy == "kill" else 600.0
            yield env.process(fleet.leave_waiting(worker, grace))
        if polling.is_alive:
            polling.interrupt()
        leaving += env.now - began
    result["upgrade"], result["leaving"] = env.now - started, leaving
    yield env.timeout(max(0.0, sizes["upgrade_window"] - (env.now - started)))
    while any(c.ended is None and not c.failed for c in caught):
        yield env.timeout(0.2)
    switch.stopped = True
    yield env.all_of(callers)
    switch.over = True


def _scale_out(
    fleet: Fleet,
    ref: Reference,
    sizes: dict[str, Any],
    new_call: Any,
    calls: Calls,
    switch: Switch,
    result: dict[str, Any],
) -> Generator[simpy.Event, Any, None]:
    env = fleet.env
    first_workers(fleet, ref, 2)
    samples: list[Sample] = result["samples"]
    callers = closed_loop(env, fleet.client, sizes["overload"], new_call, switch, calls)
    yield env.timeout(sizes["warmup"])
    starting = [env.process(fleet.start()) for _ in range(2)]
    yield env.all_of(starting)
    new = [started(process) for process in starting]
    added_at = env.now
    yield env.timeout(sizes["duration"])
    switch.stopped = True
    yield env.all_of(callers)
    switch.over = True
    result["share"] = seconds_to_share(samples, {i.name for i in new}, added_at, fair_share=2 / 4)


def _sample(fleet: Fleet, result: dict[str, Any], switch: Switch) -> Generator[simpy.Event, Any, None]:
    """`Steps`: every worker's counter, one scrape after another, then a pause; each scrape costs CPU at both
    ends when the cell pays for them (`result["scrape"]`)."""
    samples: list[Sample] = result["samples"]
    while not switch.over:
        for instance in fleet.live if "scrape" in result else ():
            yield from _scrape(instance, result)
        samples.append(Sample(fleet.env.now, {i.name: float(i.steps) for i in fleet.live}))
        yield fleet.env.timeout(SAMPLE_EVERY)


def _scrape(instance: Instance, result: dict[str, Any]) -> Generator[simpy.Event, Any, None]:
    cost, scraper = result["scrape"]
    yield from scraper.compute(cost.scraper / 2)  # the request
    if instance.alive:
        yield from instance.group.compute(cost.worker)
    yield from scraper.compute(cost.scraper / 2)  # the answer, parsed


def _poll_idle(fleet: Fleet, instance: Instance, result: dict[str, Any]) -> Generator[simpy.Event, Any, None]:
    """`_wait_idle`: the leaving worker's page every 50 ms until it is idle or gone (interrupted then)."""
    if "scrape" not in result:
        return
    fleet.polled(instance, True)
    try:
        while instance.alive:
            yield from _scrape(instance, result)
            yield fleet.env.timeout(IDLE_POLL)
    except simpy.Interrupt:
        return
    finally:
        fleet.polled(instance, False)
