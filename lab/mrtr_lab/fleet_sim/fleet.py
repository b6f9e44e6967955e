"""The fleet: instances on their hosts behind the proxy, and what happens to them (start, drain, leave, slow, pause).

Two layouts. The calibration's is the real benchmark's: everything (client,
proxy, every worker and its step pool) on one machine whose cores are shared,
less the share other processes took during the real run. The study's is a
fleet as users run it: each instance on its own cores (as many as its
compute slots), the client and the proxy elsewhere, so their per-hop CPU is
time, not contention.

How instances leave (the rolling upgrade): with hand-back, the operator's
drain (out of the proxy's rotation, every computation hands back at its next
step boundary, the process exits once idle); staying where you land, out of
rotation and the process waits for its calls, up to a grace period, then is
killed (its calls' clients get 502 and, with no state, start over).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Generator
from typing import Any

import simpy

from mrtr_lab.fleet_sim.client import Client, Hedging, HopCost
from mrtr_lab.fleet_sim.host import Cpu, Dedicated, Host
from mrtr_lab.fleet_sim.instance import Instance, RoundCost
from mrtr_lab.fleet_sim.model import STARTUP_WAIT, THROTTLE_PERIOD, Model
from mrtr_lab.fleet_sim.proxy import Proxy
from mrtr_lb.balancing import Balance
from mrtr_worker.compute.policy import SheddingSettings
from mrtr_worker.compute.pool_process import STEP_NICENESS


class Fleet:
    def __init__(
        self,
        env: simpy.Environment,
        model: Model,
        settings: SheddingSettings,
        balance: Balance | str,
        rng: random.Random,
        *,
        shared_cores: float | None = None,
        hedging: Hedging | None = None,
        deadline_s: float | None = None,
    ) -> None:
        """`shared_cores`: one machine of that many cores for everything (the calibration); None: the study's.
        `deadline_s`: the callers give up on a call this long after it started (`Client.deadline_s`)."""
        self.env = env
        self.model = model
        self.settings = settings
        self.rng = rng
        self.shared = Host(env, shared_cores) if shared_cores is not None else None
        self.proxy = Proxy(env, balance, rng)
        cost = HopCost(
            self._cpu("client"),
            self._cpu("proxy"),
            model.client_first,
            model.client_hop,
            model.proxy_first,
            model.proxy_hop,
        )
        self.client = Client(env, self.proxy, cost, hedging, deadline_s)
        self.instances: list[Instance] = []
        """Every instance that ever ran (gone ones too: their step counts stay)."""
        self._numbers = itertools.count(1)

    @property
    def live(self) -> list[Instance]:
        return [i for i in self.instances if i.alive]

    @property
    def executed(self) -> int:
        return sum(i.steps for i in self.instances)

    def _cpu(self, name: str, speed: float = 1.0, nice: int = 0) -> Cpu:
        """A process's CPU: a share of the one machine at its nice level (calibration), or cores of its own
        (study)."""
        if self.shared is not None:
            return self.shared.group(name, speed, nice)
        return Dedicated(self.env, name, speed)

    def add(self, *, version: int = 1, speed: float = 1.0, join: bool = True) -> Instance:
        """An instance ready and in rotation now (the fleet as a run starts)."""
        instance = self._make(version, speed)
        if join:
            self.proxy.join(instance, rebalance=False)
        return instance

    def _make(self, version: int, speed: float) -> Instance:
        name = f"w{next(self._numbers)}"
        group = self._cpu(name, speed)
        pool = self._cpu(f"{name}-steps", speed, STEP_NICENESS) if self.shared is not None else group
        cost = RoundCost(self.model.worker_first, self.model.worker_hop)
        instance = Instance(self.env, name, group, self.settings, cost, version, pool)
        self.instances.append(instance)
        return instance

    def start(self, *, version: int = 1) -> Generator[simpy.Event, Any, Instance]:
        """Start an instance (its start-up CPU on its host), then put it in rotation; the others are told."""
        instance = self._make(version, 1.0)
        starting = self._cpu(f"{instance.name}-start")
        yield from starting.compute(self.model.start_cpu)
        starting.stop()
        yield self.env.timeout(STARTUP_WAIT)
        self.proxy.join(instance)
        return instance

    def drain(self, instance: Instance) -> Generator[simpy.Event, Any, None]:
        """Hand-back's way out: out of rotation, the worker drains, the process exits once idle."""
        self.proxy.drain(instance)
        instance.drain()
        yield instance.idle
        yield from self._gone(instance)

    def leave_waiting(self, instance: Instance, grace: float) -> Generator[simpy.Event, Any, None]:
        """Staying where you land: out of rotation, wait for the calls up to `grace`, then stop (or kill)."""
        self.proxy.drain(instance)  # the worker itself is not drained: it would hand its calls back
        if instance.busy:
            yield instance.idle | self.env.timeout(grace)
        if instance.busy:
            self.proxy.kill(instance)
        else:
            yield from self._gone(instance)

    def _gone(self, instance: Instance) -> Generator[simpy.Event, Any, None]:
        """The process exits; the proxy's pool lists it until `leave_lag` later (it still counts in the round
        robin's positions: a call restarted meanwhile is picked as the real proxy picks it)."""
        instance.alive = False
        instance.stop_cpu()
        if self.model.leave_lag > 0:
            yield self.env.timeout(self.model.leave_lag)
        self.proxy.remove(instance)

    def throttle(
        self, instance: Instance, running: float, over: Callable[[], bool]
    ) -> Generator[simpy.Event, Any, None]:
        """SIGSTOP/SIGCONT on a duty cycle until `over()`: the instance runs `running` of every period."""
        while not over() and instance.alive:
            yield self.env.timeout(running * THROTTLE_PERIOD)
            instance.set_speed(0.0)
            yield self.env.timeout((1 - running) * THROTTLE_PERIOD)
            instance.set_speed(1.0)

    def uneven(self, over: Callable[[], bool]) -> Generator[simpy.Event, Any, None]:
        """The kernel's per-core run queues on the one shared machine: every step pool's luck drawn afresh every
        `share_period` s (lognormal, mean 1, the measured `share_spread`) until `over()`. Nothing in the study's
        layout, where every instance has cores of its own."""
        host, spread, period = self.shared, self.model.share_spread, self.model.share_period
        if host is None or spread <= 0 or period <= 0:
            return
        luck = random.Random(self.rng.getrandbits(64))  # its own stream: the other draws stay as they were
        sigma = math.sqrt(math.log(1 + spread * spread))
        while not over():
            pools = [i.pool for i in self.instances if i.alive and i.pool is not i.group]  # in order: reproducible
            host.set_luck({id(pool): luck.lognormvariate(-sigma * sigma / 2, sigma) for pool in pools})
            yield self.env.timeout(period)

    def polled(self, instance: Instance, polled: bool) -> None:
        """The benchmark reads `instance`'s page every 50 ms (or stops): on the one shared machine its step pool
        claims `poll_lift` more of the cores meanwhile (`polled_lift.py`). Nothing in the study's layout."""
        if instance.pool is not instance.group:  # a step pool of its own: the shared machine's layout
            instance.pool.set_lift(1 + self.model.poll_lift if polled else 1.0)

    def pauses(
        self, instance: Instance, every: float, length: float, until: float
    ) -> Generator[simpy.Event, Any, None]:
        """Pauses of `length` s at random, `every` s apart on average (a long garbage collection)."""
        while True:
            yield self.env.timeout(self.rng.expovariate(1 / every))
            if self.env.now >= until or not instance.alive:
                return
            speed = instance.speed
            instance.set_speed(0.0)
            self.proxy.paused(instance, self.env.now + length)
            yield self.env.timeout(length)
            if instance.alive:
                instance.set_speed(speed)


def started(process: simpy.Process) -> Instance:
    """The instance a finished `Fleet.start` process made."""
    value = process.value
    assert isinstance(value, Instance)
    return value
