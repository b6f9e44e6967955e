"""One worker instance: its compute slots and the real shedding policy and standing, serving rounds in simulated time.

A round here takes the decisions `mrtr_worker.compute.engine.Engine.run`
takes, in the same order and by the same objects: `Standing.bring` and
`judge` (the instance's standing against its peers, `start_probe` when it
runs a probe), `FleetLoad.note` and `QueueEstimate` (whether the fleet looks
full, and how long a round would queue here), `SheddingPolicy.arrives` (hand
back, refuse as busy, run, or wait for a slot with the way out a rebalance
takes), then a slice of steps with
`at_step_end` at every step boundary (the hand-back and the pace it carries
on). What is modelled rather than run: the slot queue (the
engine's is asyncio; this one is SimPy, first come first served like it),
the step itself (CPU work on the instance's `Host` group instead of a sieve)
and the round's own CPU (decrypt, dispatch, seal: measured per hop).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import simpy

from mrtr_lab.fleet_sim.host import Cpu
from mrtr_protocol.rounds import EndOfRound
from mrtr_worker.compute.fleet_load import FleetLoad
from mrtr_worker.compute.policy import Arrival, Boundary, Busy, HandBack, SheddingPolicy, SheddingSettings, Wait
from mrtr_worker.compute.queue_estimate import QueueEstimate
from mrtr_worker.compute.standing import Judgement, Standing, from_peer, last_instance
from mrtr_worker.sealing.layout import Trace

TOOL = "count_primes"


class Outcome(Enum):
    COMPLETE = "complete"
    HAND_BACK = "hand_back"
    BUSY = "busy"
    """Refused as busy before anything ran (`mrtr_protocol.busy`): the client may send it again after the hint."""
    GONE = "gone"
    """The client hung up (a hedge's loser, a request the proxy abandoned) or the instance died: no answer."""


@dataclass
class Checkpoint:
    """What a call's sealed `requestState` holds: steps done, and the trace (hops, visited, pace)."""

    steps: int = 0
    trace: Trace = field(default_factory=Trace)
    sealed: bool = False
    """False until a worker first hands it back: a call with no state starts over from nothing."""
    refused: bool = False
    """Its last round was refused at admission (`engine.REFUSED_KEY`): the next instance learns this one was full."""

    def copy(self) -> Checkpoint:
        trace = Trace(self.trace.hops, list(self.trace.visited), self.trace.pace)
        return Checkpoint(self.steps, trace, self.sealed, self.refused)


@dataclass(eq=False)
class Attempt:
    """One request of a call, as one instance sees it: it runs from a copy of the client's checkpoint."""

    call: Any
    """The call it belongs to (`client.Call`): its step count and step work."""
    state: Checkpoint
    reply: simpy.Event
    """Succeeds with the `Reply` (from the instance, or a 502/504 from the proxy)."""
    hung_up: simpy.Event
    """Succeeds when nobody waits for the answer any more: the round ends at its next boundary, unanswered."""
    first: bool = True

    @property
    def gone(self) -> bool:
        return bool(self.hung_up.triggered)


@dataclass(frozen=True)
class Reply:
    status: int
    outcome: Outcome
    state: Checkpoint | None = None
    reason: EndOfRound | None = None
    retry_after_ms: int = 0
    instance: str = ""


class Slots:
    """A fixed number of compute slots, first come first served, as `mrtr_worker.compute.slots.Slots`."""

    def __init__(self, env: simpy.Environment, capacity: int) -> None:
        self._env = env
        self.free = capacity
        self._waiters: deque[simpy.Event] = deque()
        self._quiet: set[simpy.Event] = set()

    @property
    def waiting(self) -> int:
        """Waiters that press running computations to yield (a task's quiet turn apart)."""
        return len(self._waiters) - len(self._quiet)

    @property
    def available(self) -> bool:
        """Whether `try_acquire` would succeed now."""
        return self.free > 0 and not self._waiters

    def try_acquire(self) -> bool:
        if self.available:
            self.free -= 1
            return True
        return False

    def request(self, *, quiet: bool = False) -> simpy.Event:
        waiter = self._env.event()
        self._waiters.append(waiter)
        if quiet:
            self._quiet.add(waiter)
        return waiter

    def cancel(self, waiter: simpy.Event) -> None:
        """Give up a wait; a slot already handed over is passed on."""
        if waiter.triggered:
            self.release()
        else:
            self._waiters.remove(waiter)
            self._quiet.discard(waiter)

    def release(self) -> None:
        if self._waiters:
            waiter = self._waiters.popleft()
            self._quiet.discard(waiter)
            waiter.succeed()
        else:
            self.free += 1


@dataclass(frozen=True)
class RoundCost:
    """The CPU a round costs the worker's main process (decrypt and dispatch, seal): measured per hop."""

    first: float
    resumed: float


class Instance:
    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        group: Cpu,
        settings: SheddingSettings,
        cost: RoundCost,
        version: int = 1,
        pool: Cpu | None = None,
    ) -> None:
        """`group`: the worker's main process (each round's own CPU); `pool`: its step processes (the steps),
        the same as `group` where the instance has cores of its own."""
        self.env = env
        self.name = name
        self.group = group
        self.pool = pool if pool is not None else group
        self.version = version
        self.policy = SheddingPolicy(settings)
        self.standing = Standing.for_step_aside(settings.step_aside)
        self.slots = Slots(env, settings.max_concurrent)
        self.fleet_load = FleetLoad(settings.fleet_full_hold_ms)
        self.queue = QueueEstimate(settings.max_concurrent)
        self.cost = cost
        self.draining = False
        self.alive = True
        self.busy = 0
        """Rounds being served here (the worker's in-flight requests): a draining instance leaves at 0."""
        self.steps = 0
        """Steps run here (`mrtr_worker_compute_steps_total`)."""
        self.idle = env.event()
        self.rebalanced = env.event()
        self.on_standing: Callable[[], None] | None = None
        """Told when the standing puts this instance aside (`stepping_aside`): the proxy's health check follows it."""
        self._running: set[Attempt] = set()

    # --- lifecycle -------------------------------------------------------------------------------

    def drain(self) -> None:
        self.draining = True
        self._check_idle()

    def rebalance(self) -> None:
        """`POST /admin/rebalance`: calls queued for a slot that may still move, leave."""
        if not self.rebalanced.callbacks:
            return  # nobody queued here waits on it
        event, self.rebalanced = self.rebalanced, self.env.event()
        event.succeed()

    def kill(self) -> list[Attempt]:
        """SIGKILL: every round here ends unanswered; the proxy answers their clients 502."""
        self.alive = False
        self.stop_cpu()
        killed = list(self._running)
        self._running.clear()
        return killed

    @property
    def speed(self) -> float:
        return self.group.speed

    def set_speed(self, speed: float) -> None:
        """The process and its step pool together (SIGSTOP/SIGCONT reach both, as `straggler.Throttle` sends)."""
        for cpu in {id(self.group): self.group, id(self.pool): self.pool}.values():
            cpu.set_speed(speed)

    def stop_cpu(self) -> None:
        for cpu in {id(self.group): self.group, id(self.pool): self.pool}.values():
            cpu.stop()

    def stepping_aside(self) -> bool:
        """What its `/readyz` says of its standing (`Engine.stepping_aside`): out of rotation while slow."""
        aside = self.standing.aside(self.policy.settings.straggler_ratio, self.env.now)
        return self.policy.steps_aside(aside=aside)

    def _standing_moved(self) -> None:
        """Tell the proxy when the standing puts this instance aside; its probes see when that ends."""
        if self.on_standing is not None and self.policy.settings.step_aside and self.stepping_aside():
            self.on_standing()

    def _check_idle(self) -> None:
        if self.busy == 0 and not self.idle.triggered:
            self.idle.succeed()

    # --- one round -------------------------------------------------------------------------------

    def serve(self, attempt: Attempt) -> Generator[simpy.Event, Any, None]:
        """A SimPy process: one round, answered through `attempt.reply` unless nobody waits any more."""
        self.busy += 1
        if self.idle.triggered:
            self.idle = self.env.event()
        self._running.add(attempt)
        try:
            reply = yield from self._round(attempt)
            if reply is not None and self.alive and not attempt.reply.triggered:
                attempt.reply.succeed(reply)
        finally:
            self._running.discard(attempt)
            self.busy -= 1
            self._check_idle()

    def _round(self, attempt: Attempt) -> Generator[simpy.Event, Any, Reply | None]:
        yield from self.group.compute(self.cost.first if attempt.first else self.cost.resumed)
        state, policy, here = attempt.state, self.policy, self.name
        trace = state.trace
        now = self.env.now
        self.standing.bring(TOOL, trace.pace, peer=from_peer(trace.visited, here), now=now)
        judgement = self.standing.judge(TOOL, policy.settings.straggler_ratio, now)
        if judgement is Judgement.PROBE:
            self.standing.start_probe(TOOL, now)
        self._standing_moved()
        last = last_instance(trace.visited)
        self.fleet_load.note(refused_elsewhere=state.refused and last not in (None, here), now=now)
        arrival = Arrival(
            pace=trace.pace,
            hops=trace.fair_hops,
            instance_id=here,
            last=last,
            draining=self.draining,
            slow=judgement is Judgement.SLOW,
            full=not self.slots.available,
            fleet_full=self.fleet_load.full(now, self.slots.waiting),
            fresh=state.steps == 0,
            expected_wait_ms=self.queue.wait_ms(self.slots.waiting),
        )
        decision = policy.arrives(arrival)
        if isinstance(decision, Busy):
            return Reply(200, Outcome.BUSY, None, None, decision.retry_after_ms, self.name)
        if isinstance(decision, HandBack):
            return self._hand_back(state, decision)
        if isinstance(decision, Wait):
            got = yield from self._queue(attempt, decision)
            if got is None:
                return None  # the client hung up while it waited
            if not got:
                assert decision.leave is not None  # only a wait that may end has a way out
                return self._hand_back(state, decision.leave)
        else:
            taken = self.slots.try_acquire()
            assert taken, "a slot was free when the policy decided"
        held_from = self.env.now
        try:
            return (yield from self._slice(attempt, decision.fled))
        finally:
            if self.alive:
                self.slots.release()
                self.queue.held(self.env.now - held_from)

    def _queue(self, attempt: Attempt, wait: Wait) -> Generator[simpy.Event, Any, bool | None]:
        """Wait for a slot (True), leave on a rebalance or after the policy's patience (False), or hang up (None)."""
        waiter = self.slots.request()
        events = [waiter, attempt.hung_up]
        if wait.leave is not None:
            events.append(self.rebalanced)
        if wait.patience_s is not None:
            events.append(self.env.timeout(wait.patience_s))
        yield self.env.any_of(events)
        if waiter.triggered:
            if attempt.gone:
                self.slots.release()
                return None
            return True
        self.slots.cancel(waiter)
        return None if attempt.gone else False

    def _slice(self, attempt: Attempt, fled: bool) -> Generator[simpy.Event, Any, Reply | None]:
        state, policy = attempt.state, self.policy
        trace, total, work = state.trace, attempt.call.steps, attempt.call.step_work
        started = self.env.now
        here = 0
        reference = self.standing.reference(TOOL, started)
        pace_here = not from_peer(trace.visited, self.name)
        try:
            while state.steps < total:
                if attempt.gone or not self.alive:
                    return None
                boundary = Boundary(
                    slice_ms=(self.env.now - started) * 1000,
                    hops=trace.fair_hops,
                    waiting=self.slots.waiting,
                    draining=self.draining,
                    steps=here,
                    pace=trace.pace,
                    fled=fled,
                    pace_here=pace_here,
                    reference=reference,
                    instance_id=self.name,
                    fleet_full=self.fleet_load.full(self.env.now, self.slots.waiting),
                )
                end = policy.at_step_end(boundary)
                if end is not None:
                    return self._hand_back(state, end)
                yield from self.pool.compute(work())
                if not self.alive:
                    return None
                state.steps += 1
                here += 1
                self.steps += 1
                attempt.call.executed += 1
            return Reply(200, Outcome.COMPLETE, state, instance=self.name)
        finally:
            if self.alive:
                now = self.env.now
                self.standing.observe(TOOL, here, (now - started) * 1000, now)
                self._standing_moved()

    def _hand_back(self, state: Checkpoint, end: HandBack) -> Reply:
        state.trace.pace = end.pace
        state.trace.record(self.name, self.version)
        state.sealed = True
        state.refused = end.reason is EndOfRound.ADMISSION
        return Reply(200, Outcome.HAND_BACK, state, end.reason, end.retry_after_ms, self.name)
