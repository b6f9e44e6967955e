"""The spike benchmark's schedule in simulated time: the same phases and setups at any fleet size.

`benchmarks.spike` measures three real workers; this runs its schedule (`PHASES`: 70 % of capacity, then
1.4x and 3x for a phase each, and back) over fleets of the study's layout (each instance on its own
cores, the calibrated step and hop costs), with the same policy objects (`SheddingPolicy`, `FleetLoad`,
`QueueEstimate` inside each `Instance`), the same long-call mix (`benchmarks._cluster.MIX`: 8, 20 and 40
steps in turn, each step the calibrated short call's) arriving open loop, and the same caller's
deadline (`_spike_load.DEADLINE_S`). Short calls take no compute slot, so their tail is left to the real
benchmark; what the simulator adds is the fleet's size.

Figures per phase, as the real benchmark defines them: goodput (steps per second run over the fleet's
step capacity), HTTP requests per completed call (its rounds: hand-backs, busy refusals, transport
retries, and the last), and how the calls that arrived in the phase ended.
"""

from __future__ import annotations

import random
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

import simpy

from benchmarks._cluster import MIX
from benchmarks._spike_load import DEADLINE_S, MEAN_STEPS, Phase
from mrtr_lab.fleet_sim.client import Call
from mrtr_lab.fleet_sim.fleet import Fleet
from mrtr_lab.fleet_sim.model import Model, step_work
from mrtr_lb.balancing import Balance
from mrtr_worker.compute.policy import SheddingSettings

MIX_STEPS = tuple(call.steps for call in MIX)
AFTER_S = DEADLINE_S
"""Simulated seconds after the schedule for the last calls to end (none outlives its deadline)."""


@dataclass(frozen=True)
class SimPhase:
    phase: Phase
    goodput: float
    arrived: int
    completed: int
    refused: int
    timed_out: int
    requests_per_call: float
    busy_per_call: float


def simulate(
    model: Model, settings: SheddingSettings, size: int, phases: Sequence[Phase], seed: int = 1
) -> list[SimPhase]:
    """The schedule over `size` instances with `settings`, round robin, every call with the caller's deadline."""
    env = simpy.Environment()
    rng = random.Random(seed)
    fleet = Fleet(env, model, settings, Balance.ROUND_ROBIN, rng, deadline_s=DEADLINE_S)
    for _ in range(size):
        fleet.add()
    work = step_work(model.step_mean, model.step_cv, rng, model.worker_step)
    capacity = size * settings.max_concurrent / (model.step_mean + model.worker_step)
    """Steps per second with every slot stepping."""
    edges = [0.0]
    for phase in phases:
        edges.append(edges[-1] + phase.seconds)
    calls: list[tuple[int, Call]] = []
    executed_at: list[int] = []

    def arrivals() -> Generator[simpy.Event, Any, None]:
        n = 0
        for index, phase in enumerate(phases):
            rate = phase.demand * capacity / MEAN_STEPS
            end = edges[index + 1]
            while True:
                gap = rng.expovariate(rate)
                if env.now + gap >= end:
                    yield env.timeout(end - env.now)
                    break
                yield env.timeout(gap)
                call = Call(MIX_STEPS[n % len(MIX_STEPS)], work, env.now)
                n += 1
                calls.append((index, call))
                env.process(fleet.client.call(call))

    def sample() -> Generator[simpy.Event, Any, None]:
        for edge in edges:
            yield env.timeout(edge - env.now)
            executed_at.append(fleet.executed)

    env.process(arrivals())
    env.process(sample())
    env.run(until=edges[-1] + AFTER_S)
    return [
        _figures(phase, [c for i, c in calls if i == index], executed_at[index + 1] - executed_at[index], capacity)
        for index, phase in enumerate(phases)
    ]


def _figures(phase: Phase, calls: list[Call], executed: int, capacity: float) -> SimPhase:
    completed = [c for c in calls if c.ended is not None and not c.timed_out]
    requests = [c.rounds + c.busy + c.failures + 1 for c in completed]
    return SimPhase(
        phase=phase,
        goodput=executed / phase.seconds / capacity,
        arrived=len(calls),
        completed=len(completed),
        refused=sum(c.refused for c in calls),
        timed_out=sum(c.timed_out for c in calls),
        requests_per_call=sum(requests) / len(requests) if requests else float("nan"),
        busy_per_call=sum(c.busy for c in completed) / len(completed) if completed else float("nan"),
    )
