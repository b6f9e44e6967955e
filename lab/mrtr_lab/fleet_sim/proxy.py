"""The proxy: the real `mrtr_lb` backend pool and balancers, forwarding rounds to instances in simulated time.

What is the proxy's own code: `BackendPool` (eligibility, the round-robin
cursor, joins) and the pickers of `mrtr_lb.balancing` (two choices, least
request), over `Backend.in_flight`, which this model keeps as the proxy
does (up when a request is forwarded, down when its answer is back). What is
modelled: the health checker's verdicts on an instance that stops answering
(a pause): a probe every `health_interval` that gets no answer within
`health_timeout` takes it out of rotation, and after `unresponsive_after`
such probes the requests running there are answered 504 (`HealthChecker`);
a killed instance's requests get 502; and the verdicts on an instance that
steps aside as slow (`MRTR_WORKER_STEP_ASIDE`: its `/readyz` answers 429
while its standing would hand every round on), taken at that instance's
next probe, one every `health_interval` at a phase of its own, as the
checker's loop does, and without the rebalance calls of a join (the proxy
knows a backend back from stepping aside brings no capacity). Random
placement (the supermarket model's baseline) is a picker of this module,
not of the proxy.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Collection, Generator, Sequence
from typing import Any

import simpy

from mrtr_lab.fleet_sim.instance import Attempt, Instance, Outcome, Reply
from mrtr_lb.backends import Backend, BackendPool
from mrtr_lb.balancing import Balance, picker
from mrtr_lb.config import Settings
from mrtr_protocol.fleet import READINESS_PATH, Readiness

STEPPED_ASIDE = f"{READINESS_PATH} answered {Readiness.STEPPED_ASIDE.value}"
"""The reason the real checker records for a worker stepping aside."""


def _default(name: str) -> Any:
    """The proxy's default for a setting (its `Settings` refuses to be built without backends)."""
    return Settings.model_fields[name].default


logging.getLogger("mrtr_lb").setLevel(logging.ERROR)  # the pool logs every simulated rotation change

HEALTH_INTERVAL: float = _default("health_interval")
HEALTH_TIMEOUT: float = _default("health_timeout")
UNRESPONSIVE_AFTER: int = _default("unresponsive_after")
REBALANCE_DEBOUNCE: float = _default("rebalance_debounce")


class RandomPick:
    """Random placement: the supermarket model's baseline (no proxy ships it; the anchors need it)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def __call__(self, backends: Sequence[Backend], excluded: Collection[Backend]) -> Backend | None:
        usable = [b for b in backends if b.healthy and not b.drained and b not in excluded]
        return self._rng.choice(usable) if usable else None


class Proxy:
    def __init__(self, env: simpy.Environment, balance: Balance | str, rng: random.Random) -> None:
        self.env = env
        self.pool = BackendPool()
        self.pool.picker = RandomPick(rng) if balance == "random" else picker(Balance(balance), rng)
        self.instances: dict[str, Instance] = {}
        self._backends: dict[str, Backend] = {}
        self._pending: dict[str, set[Attempt]] = {}
        self._joined: set[str] = set()
        self._rng = rng
        self._rebalancing = False
        """A round of rebalance calls is gathering joins (`REBALANCE_DEBOUNCE`), as `mrtr_lb.rebalance` does."""
        self._watched: set[str] = set()
        """Instances whose readiness the health check follows probe by probe (`_readiness`): stepping aside."""
        self._phases: dict[str, float] = {}
        """Where each instance's probe loop stands in its `HEALTH_INTERVAL`, drawn at its first watch."""
        self.unavailable = 0
        """Requests answered 503: no instance in rotation."""

    # --- membership -------------------------------------------------------------------------------

    def join(self, instance: Instance, *, rebalance: bool = True) -> None:
        """In rotation (healthy, first probe passed); with `rebalance`, the others are told capacity joined."""
        backend = self.pool.add(instance.name)
        self.instances[instance.name] = instance
        self._backends[instance.name] = backend
        self._pending.setdefault(instance.name, set())
        self.pool.set_health(backend, True)
        instance.on_standing = lambda: self._watch(instance)
        if not rebalance:
            return
        self._joined.add(instance.name)
        if not self._rebalancing:
            self._rebalancing = True
            self.env.process(self._rebalance())

    def _rebalance(self) -> Generator[simpy.Event, Any, None]:
        """One round for the joins of a debounce window: every routable instance but those that joined is told."""
        yield self.env.timeout(REBALANCE_DEBOUNCE)
        joined, self._joined, self._rebalancing = self._joined, set(), False
        for name, other in list(self.instances.items()):
            if name not in joined and self._backends[name].eligible:
                other.rebalance()

    def turn_to(self, instance: Instance) -> None:
        """Move the round robin on until `instance` is its next pick (where a real run's proxy stood)."""
        backend = self._backends[instance.name]
        for _ in range(len(self.pool)):
            if self.pool.next_pick() is backend:
                return
            self.pool.pick()

    def drain(self, instance: Instance) -> None:
        """Out of rotation (the operator's drain on the proxy): no new request goes there."""
        self.pool.set_drained(self._backends[instance.name], True)

    def remove(self, instance: Instance) -> None:
        self.pool.remove(instance.name)
        self.instances.pop(instance.name, None)

    def kill(self, instance: Instance) -> None:
        """The instance died: its open requests are answered 502 (the client retries with its last state)."""
        instance.kill()
        for attempt in list(self._pending.get(instance.name, ())):
            self._answer(attempt, Reply(502, Outcome.GONE, instance=instance.name))
        self.remove(instance)

    def paused(self, instance: Instance, until: float) -> None:
        """The instance stops answering until `until`: the health checker's probes time out meanwhile."""
        self.env.process(self._probe_through(instance, until))

    def _probe_through(self, instance: Instance, until: float) -> Generator[simpy.Event, Any, None]:
        backend = self._backends[instance.name]
        yield self.env.timeout(self._rng.uniform(0, HEALTH_INTERVAL))  # where the probe loop's phase stands
        failed = 0
        while self.env.now + HEALTH_TIMEOUT < until:  # a probe sent now gets no answer in time
            yield self.env.timeout(HEALTH_TIMEOUT)
            failed += 1
            self.pool.set_health(backend, False, "timeout")
            if UNRESPONSIVE_AFTER and failed >= UNRESPONSIVE_AFTER:
                for attempt in list(self._pending.get(instance.name, ())):
                    self._answer(attempt, Reply(504, Outcome.GONE, instance=instance.name))
            yield self.env.timeout(HEALTH_INTERVAL)
        if not backend.healthy and instance.alive:
            yield self.env.timeout(max(0.0, until - self.env.now))
            if instance.alive and not instance.draining:
                aside = instance.stepping_aside()
                self.pool.set_health(backend, not aside, STEPPED_ASIDE if aside else None, aside=aside)
                if aside:
                    self._watch(instance)

    def _watch(self, instance: Instance) -> None:
        """Follow the instance's readiness from its next probe on, while it may be stepping aside."""
        if instance.name not in self._watched and instance.name in self._backends:
            self._watched.add(instance.name)
            self.env.process(self._readiness(instance))

    def _readiness(self, instance: Instance) -> Generator[simpy.Event, Any, None]:
        """Probe `/readyz` every `HEALTH_INTERVAL` until the instance is ready again (or gone): the checker's
        loop for one backend, whose phase each instance draws once (a probe's own time is left out)."""
        backend = self._backends[instance.name]
        phase = self._phases.setdefault(instance.name, self._rng.uniform(0, HEALTH_INTERVAL))
        yield self.env.timeout(HEALTH_INTERVAL - (self.env.now - phase) % HEALTH_INTERVAL)
        try:
            while instance.alive and self.pool.get(instance.name) is backend:
                aside = instance.stepping_aside()
                if not instance.draining:
                    self.pool.set_health(backend, not aside, STEPPED_ASIDE if aside else None, aside=aside)
                if not aside:
                    return
                yield self.env.timeout(HEALTH_INTERVAL)
        finally:
            self._watched.discard(instance.name)

    # --- requests ---------------------------------------------------------------------------------

    def forward(self, attempt: Attempt, to: Instance | None = None) -> Backend | None:
        """Send one request to the instance the pool picks (or `to`); its answer comes through `attempt.reply`."""
        backend = self.pool.pick() if to is None else self._backends[to.name]
        if backend is None:
            self.unavailable += 1
            attempt.reply.succeed(Reply(503, Outcome.GONE))
            return None
        instance = self.instances[backend.url]
        backend.in_flight += 1
        backend.requests += 1
        pending = self._pending[backend.url]
        pending.add(attempt)
        attempt.reply.callbacks.append(lambda _: self._closed(backend, pending, attempt))
        self.env.process(instance.serve(attempt))
        return backend

    def _closed(self, backend: Backend, pending: set[Attempt], attempt: Attempt) -> None:
        backend.in_flight -= 1
        pending.discard(attempt)

    def _answer(self, attempt: Attempt, reply: Reply) -> None:
        """The proxy answers for the instance (502, 504): nobody waits for the instance's own answer any more."""
        if not attempt.reply.triggered:
            attempt.reply.succeed(reply)
        if not attempt.hung_up.triggered:
            attempt.hung_up.succeed()
