"""The published figure the model's proxy and queues must reproduce before anything else: the supermarket model.

Mitzenmacher's power of two choices: n single-server queues, Poisson
arrivals at rate `load` per server, exponential service of mean 1. With
random placement each queue is an M/M/1 and the mean time in system is
1 / (1 - load): 100 service times at 99 %. With the shorter of two queues
drawn at random it tends (n large) to the sum over i >= 1 of
load^(2^i - 2): 5.4 at 99 %. The model runs it with its own pieces (the
real `mrtr_lb` two-choices picker, one-slot instances with shedding off,
no hop cost), each queue started at a length drawn from the formula's
steady state so a short run measures it. Random placement at 99 % still
mixes too slowly for a short run (its relaxation time grows as
1 / (1 - sqrt(load))^2, some 40,000 service times), so it runs at 90 %,
where the formula says 10.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import simpy

from mrtr_lab.fleet_sim.client import Call
from mrtr_lab.fleet_sim.fleet import Fleet
from mrtr_lab.fleet_sim.instance import Attempt, Checkpoint
from mrtr_lab.fleet_sim.metrics import Figures
from mrtr_lab.fleet_sim.model import Model
from mrtr_lab.fleet_sim.workload import Calls, Switch, open_loop
from mrtr_worker.compute.policy import SheddingSettings

ZERO_COST = Model(
    step_mean=1.0,
    step_cv=1.0,
    long_step_mean=1.0,
    long_step_cv=1.0,
    crowded_step_mean=1.0,
    crowded_long_step_mean=1.0,
    client_first=0.0,
    client_hop=0.0,
    proxy_first=0.0,
    proxy_hop=0.0,
    worker_first=0.0,
    worker_hop=0.0,
    worker_step=0.0,
    start_cpu=0.0,
)


@dataclass(frozen=True)
class Anchor:
    name: str
    balance: str
    load: float
    published: float
    """Mean time in system, in service times, by the formula (n large)."""


ANCHORS = (
    Anchor("supermarket, two choices", "two_choices", 0.99, sum(0.99 ** (2**i - 2) for i in range(1, 40))),
    Anchor("supermarket, random placement", "random", 0.90, 1 / (1 - 0.90)),
)


def supermarket(anchor: Anchor, servers: int, service_times: float, seed: int) -> tuple[float, int]:
    """(mean time in system of the calls counted, how many) after a warm-up of a third of the run."""
    env = simpy.Environment()
    rng = random.Random(seed)
    fleet = Fleet(env, ZERO_COST, SheddingSettings(enabled=False, max_concurrent=1), anchor.balance, rng)
    calls, switch = Calls(), Switch(env, service_times / 3, service_times)

    def new_call(now: float) -> Call:
        return Call(1, lambda: rng.expovariate(1.0), now)

    for _ in range(servers):  # each queue starts as long as the formula's steady state would have it
        instance = fleet.add()
        for _ in range(_stationary_length(anchor, rng)):
            attempt = Attempt(new_call(0.0), Checkpoint(), env.event(), env.event())
            fleet.proxy.forward(attempt, to=instance)

    open_loop(env, fleet.client, lambda: anchor.load * servers, new_call, switch, calls, rng)
    env.run(until=service_times)
    switch.stopped = True
    env.run(until=service_times * 3)  # the counted calls drain (no new arrivals)
    figures = Figures.of(calls.measured)
    return figures.mean, figures.calls


def _stationary_length(anchor: Anchor, rng: random.Random) -> int:
    """A queue length drawn from the formula's steady state: P(at least i) = load^i (random placement) or
    load^(2^i - 1) (two choices), so a short run need not wait for the queues to fill."""
    draw, length = rng.random(), 0
    while True:
        at_least = anchor.load ** (length + 1) if anchor.balance == "random" else anchor.load ** (2 ** (length + 1) - 1)
        if draw >= at_least:
            return length
        length += 1
