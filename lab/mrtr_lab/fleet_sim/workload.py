"""Who calls: closed-loop callers (the real benchmarks' load) or Poisson arrivals at a given load (the study's).

Closed loop, as `mrtr_lab._why_shed.load.closed_loop`: each caller calls
again as soon as its call returns, until told to stop; the calls in flight
then finish. Open loop: arrivals at a rate that makes the fleet's load what
the study asks (load 0.9: the calls need 90 % of the step capacity of the
instances in rotation), whatever the latency, as the supermarket model and
"The Tail at Scale" assume.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Protocol

import simpy

from mrtr_lab.fleet_sim.client import Call


class Caller(Protocol):
    """What makes a call: the MRTR client (`client.Client`) or the task client (`tasks.TaskClient`)."""

    def call(self, call: Call) -> Generator[simpy.Event, Any, None]: ...


@dataclass
class Calls:
    """Every call a load started, and which of them the figures count."""

    all: list[Call] = field(default_factory=list)
    measured: list[Call] = field(default_factory=list)

    def done(self) -> list[Call]:
        return [c for c in self.measured if c.ended is not None]


@dataclass
class Switch:
    """When a load stops starting calls (set from a scenario) and when it counts them."""

    env: simpy.Environment
    measure_from: float = 0.0
    measure_until: float = float("inf")
    stopped: bool = False
    over: bool = False
    """Every call has ended: what runs beside the load (a throttle, the step sampler) stops too."""

    def counts(self, now: float) -> bool:
        return self.measure_from <= now < self.measure_until


def closed_loop(
    env: simpy.Environment,
    client: Caller,
    callers: int,
    new_call: Callable[[float], Call],
    switch: Switch,
    calls: Calls,
) -> list[simpy.Process]:
    """`callers` callers, each calling again as soon as its call returns, until `switch.stopped`."""

    def caller() -> Generator[simpy.Event, Any, None]:
        while not switch.stopped:
            call = new_call(env.now)
            calls.all.append(call)
            if switch.counts(env.now):
                calls.measured.append(call)
            yield env.process(client.call(call))
            if call.failed:
                yield env.timeout(0.1)

    return [env.process(caller()) for _ in range(callers)]


def open_loop(
    env: simpy.Environment,
    client: Caller,
    rate: Callable[[], float],
    new_call: Callable[[float], Call],
    switch: Switch,
    calls: Calls,
    rng: random.Random,
) -> simpy.Process:
    """Poisson arrivals at `rate()` calls per second (read at every arrival: a scale-out changes it)."""

    def arrivals() -> Generator[simpy.Event, Any, None]:
        while not switch.stopped:
            yield env.timeout(rng.expovariate(rate()))
            if switch.stopped:
                return
            call = new_call(env.now)
            calls.all.append(call)
            if switch.counts(env.now):
                calls.measured.append(call)
            env.process(client.call(call))

    return env.process(arrivals())
