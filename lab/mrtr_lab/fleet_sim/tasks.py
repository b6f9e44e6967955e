"""The task half in simulated time: tasks created through the proxy, slices pulled from a shared queue by the workers.

What runs here is the task runner's own rules: each worker's `SliceRules`
(`mrtr_worker.tasks.slicing`, over the instance's `SheddingPolicy` and the
runner's slice length) decides whether it is slow, how long it leaves fresh
slices to its peers, whether a slice it takes is kept (`late`), how a slice
opens (the pace it is judged by, a pass-on from the straggler its task
fled), why it ends at a step boundary (drain, straggler move, pressure, the
slice's end, the alone re-check) and the pace and move its checkpoint
carries. The loops around them follow `TaskRunner._consume`, `_run_slice`,
`_steps` and `_reclaim` step for step. What is modelled rather than run is
Redis:

* the stream and its consumer group (`SliceQueue`): a slice put on it goes
  to the worker blocked longest in XREADGROUP, or waits first in, first out;
  a worker that waited as a slow one reads with a 1 ms block, the others with
  the runner's `poll_ms`;
* the runners' heartbeats (`Board`): every `max(0.2, lease / 4)` s each
  worker writes its standing and reads its peers' (those heard from within
  the lease), so a worker knows its peers' rates only as of its last beat;
* the round trips, as CPU at the worker's main process and at Redis (one
  process of its own: on the shared cores in a replay, on a core of its own in
  the study), each measured by `task_cost.py`: a task's creation and
  following, a slice (take and begin, then the checkpoint's transaction and
  the change pushed to the client), a step's lease check, a poll. Smaller
  round trips (the presence heartbeat every 200 ms, the slow worker's look at
  the queue's oldest slice, the alone question, a put-back) are costed as a
  lease check, a round trip of the same kind.

Not modelled: a worker's death and the takeover of its slices (leases,
presence, fencing), questions (`input_required`), cancels, the run-time
limit, and the listen's own worker (the change of each slice is pushed by
whichever worker holds the client's listen; its cost is charged to the
worker that ran the slice).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import Any

import simpy

from mrtr_lab.fleet_sim.client import Call, HopCost
from mrtr_lab.fleet_sim.fleet import Fleet
from mrtr_lab.fleet_sim.host import Cpu, Host
from mrtr_lab.fleet_sim.instance import TOOL, Instance, Slots
from mrtr_lab.fleet_sim.task_cost import Costs, TaskCost
from mrtr_protocol.rounds import EndOfRound
from mrtr_worker.compute.policy import Boundary
from mrtr_worker.config import WorkerSettings
from mrtr_worker.sealing.layout import Pace
from mrtr_worker.tasks.slicing import SliceRules


def _default(name: str) -> Any:
    return WorkerSettings.model_fields[name].default


SLICE_MS: int = _default("task_slice_ms")
LEASE_MS: int = _default("task_lease_ms")
POLL_MS: int = min(_default("task_poll_interval_ms"), 1000)
"""The runner's blocking read (`TaskRunner._poll_ms`), and the `pollIntervalMs` a task tells its client."""
CONCURRENCY: int = _default("task_concurrency")
BEAT_SECONDS = max(0.2, LEASE_MS / 4000)
"""How often a runner writes its standing and reads its peers' (`TaskRunner._reclaim`)."""
PRESENCE_SECONDS: float = _default("task_heartbeat_ms") / 1000
LATE_BLOCK_MS = 1
"""A slow worker that waited takes only what is there (`TaskRunner._consume`)."""


@dataclass(eq=False)
class Task(Call):
    """A task: its record's steps, pace and moves, and where its slices ran (`visited`)."""

    done_steps: int = 0
    pace: Pace | None = None
    moves: int = 0
    visited: list[str] = field(default_factory=list)
    """The instance of every slice begun (a move's own included), as the result's `_meta` says."""


class SliceQueue:
    """The stream and its consumer group: blocked readers served first come, slices first in, first out."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.waiting: deque[tuple[Task, float]] = deque()
        self._readers: deque[simpy.Event] = deque()

    def add(self, task: Task) -> None:
        while self._readers:
            reader = self._readers.popleft()
            if not reader.triggered:
                reader.succeed(task)
                return
        self.waiting.append((task, self.env.now))

    def take(self, block_ms: float) -> Generator[simpy.Event, Any, Task | None]:
        """XREADGROUP with BLOCK: the oldest waiting slice, or the next one added within `block_ms`."""
        if self.waiting:
            return self.waiting.popleft()[0]
        reader = self.env.event()
        self._readers.append(reader)
        yield reader | self.env.timeout(block_ms / 1000)
        if reader.triggered:
            task = reader.value
            assert isinstance(task, Task)
            return task
        self._readers.remove(reader)
        return None

    def oldest_age_ms(self) -> int | None:
        return int((self.env.now - self.waiting[0][1]) * 1000) if self.waiting else None


@dataclass
class Board:
    """What the runners' heartbeats leave in Redis: when each last beat, and its standing."""

    beats: dict[str, tuple[float, dict[str, float]]] = field(default_factory=dict)

    def beat(self, name: str, rates: dict[str, float], now: float) -> None:
        self.beats[name] = (now, rates)

    def leave(self, name: str) -> None:
        self.beats.pop(name, None)

    def peer_rates(self, name: str, now: float) -> list[dict[str, float]]:
        return [rates for other, (at, rates) in self.beats.items() if other != name and now - at <= LEASE_MS / 1000]

    def peers(self, name: str, now: float) -> int:
        return len(self.peer_rates(name, now))


class TaskSlots(Slots):
    """The instance's compute slots, as `Slots`, with what the runner waits on (`Slots.wait_available`)."""

    def __init__(self, env: simpy.Environment, capacity: int) -> None:
        super().__init__(env, capacity)
        self.freed = env.event()

    def release(self) -> None:
        super().release()
        event, self.freed = self.freed, self._env.event()
        event.succeed()


@dataclass(frozen=True)
class RedisTrip:
    """One round trip's CPU: at the worker's main process, then at Redis."""

    worker: float
    redis: float


class Redis:
    """The one Redis of the fleet: its process's CPU, the slice queue and the heartbeat board."""

    def __init__(self, env: simpy.Environment, cpu: Cpu) -> None:
        self.cpu = cpu
        self.queue = SliceQueue(env)
        self.board = Board()


class SliceRunner:
    """One worker's task runner: its consume loop, its slices, its heartbeat; the decisions are its `SliceRules`."""

    def __init__(self, env: simpy.Environment, instance: Instance, redis: Redis, cost: TaskCost, worker_step: float):
        self.env = env
        self.instance = instance
        self.name = instance.name
        self.redis = redis
        self.rules = SliceRules(instance.policy, SLICE_MS)
        self.slots = TaskSlots(env, instance.policy.settings.max_concurrent)
        instance.slots = self.slots  # the engine's slots: task slices and MRTR rounds share them
        self.slice_begin = RedisTrip(cost.slice.worker / 2, cost.slice.redis / 2)
        self.slice_end = RedisTrip(cost.slice.worker / 2, cost.slice.redis / 2)
        self.lease = RedisTrip(max(0.0, cost.step.worker - worker_step), cost.step.redis)
        """A step's own cost beyond the dispatch every step pays (`Model.worker_step`): the lease check."""
        self.running = 0
        self.held_since: float | None = None
        """`TaskRunner._held_since`: since when the runner found no slot for a slice."""
        self._capacity_freed = env.event()
        self.peer_rates: list[dict[str, float]] | None = None
        self.on_commit: Any = None
        """Called with (task, final) after each checkpoint lands: the change pushed to the task's client."""
        env.process(self._consume())
        env.process(self._beat())

    # --- Redis round trips --------------------------------------------------------------------------------

    def _trip(self, trip: RedisTrip) -> Generator[simpy.Event, Any, None]:
        yield from self.instance.group.compute(trip.worker)
        yield from self.redis.cpu.compute(trip.redis)

    def _beat(self) -> Generator[simpy.Event, Any, None]:
        """`_reclaim`'s heartbeat: the standing out, the peers' in; and `_watch`'s presence beats, costed."""
        yield self.env.timeout(0.0)
        presence = self.env.process(self._presence())
        while self.instance.alive:
            if not self.instance.draining:
                yield from self._trip(self.lease)
                now = self.env.now
                self.redis.board.beat(self.name, self.rules.standing.current(now), now)
                self.peer_rates = self.redis.board.peer_rates(self.name, now)
            yield self.env.timeout(BEAT_SECONDS)
        self.redis.board.leave(self.name)
        if presence.is_alive:
            presence.interrupt()

    def _presence(self) -> Generator[simpy.Event, Any, None]:
        try:
            while self.instance.alive:
                yield from self._trip(self.lease)
                yield self.env.timeout(PRESENCE_SECONDS)
        except simpy.Interrupt:
            return

    # --- taking slices ------------------------------------------------------------------------------------

    def _consume(self) -> Generator[simpy.Event, Any, None]:
        instance, rules = self.instance, self.rules
        while instance.alive:
            if instance.draining:
                yield self.env.timeout(POLL_MS / 1000)
                continue
            if not self.slots.available:
                if self.held_since is None:
                    self.held_since = self.env.now
                patience = rules.turn_after_s - (self.env.now - self.held_since)  # from when first held back
                freed = self.slots.freed
                if patience > 0:
                    yield freed | self.env.timeout(patience)
                if not freed.triggered:
                    took = not rules.slow(self.peer_rates, self.env.now) and (yield from self._take_a_turn())
                    if not took:
                        self.held_since = None
                continue
            late = False
            if rules.slow(self.peer_rates, self.env.now):
                yield from self._trip(self.lease)  # the queue's oldest slice, read from Redis
                wait_ms = rules.pull_wait_ms(self.peer_rates, self.redis.queue.oldest_age_ms())
                if wait_ms > 0:
                    yield self.env.timeout(wait_ms / 1000)
                    continue
                late = rules.late(self.peer_rates)
            while self.running >= CONCURRENCY:
                yield self._capacity_freed
            self.running += 1
            task = yield from self.redis.queue.take(LATE_BLOCK_MS if late else POLL_MS)
            if task is None:
                self._release()
                continue
            self.env.process(self._run(task, late))

    def _take_a_turn(self) -> Generator[simpy.Event, Any, bool]:
        """`TaskRunner._take_a_turn`: calls kept every slot busy a whole slice; queue quietly for one if slices wait."""
        yield from self._trip(self.lease)  # the queue's oldest slice, read from Redis
        if self.redis.queue.oldest_age_ms() is None:
            return False
        while self.running >= CONCURRENCY:
            yield self._capacity_freed
        self.running += 1
        yield self.slots.request(quiet=True)
        task = yield from self.redis.queue.take(1)
        if task is None:
            self.slots.release()
            self._release()
            return False
        self.env.process(self._run(task, late=False, holding_slot=True))
        return True

    def _release(self) -> None:
        self.running -= 1
        event, self._capacity_freed = self._capacity_freed, self.env.event()
        event.succeed()

    # --- one slice ----------------------------------------------------------------------------------------

    def _run(self, task: Task, late: bool, holding_slot: bool = False) -> Generator[simpy.Event, Any, None]:
        try:
            yield from self._trip(self.slice_begin)  # the read and the fenced begin
            if not holding_slot and not self.slots.try_acquire():  # the slots filled since: leave it to others
                yield from self._trip(self.lease)
                self.redis.queue.add(task)
                return
            self.held_since = None
            task.visited.append(self.name)
            try:
                yield from self._steps(task, late, pressed=not holding_slot)
            finally:
                self.slots.release()
        finally:
            self._release()

    def _steps(self, task: Task, late: bool, *, pressed: bool = True) -> Generator[simpy.Event, Any, None]:
        """`TaskRunner._steps`: the same decisions in the same order, by the same rules (`pressed`: as there)."""
        env, rules, instance = self.env, self.rules, self.instance
        started = env.now
        here = 0
        alone: bool | None = None
        opening = rules.opening(task.pace, TOOL, self.peer_rates, late=late, consumer=self.name, now=started)
        judged = opening.judged
        if opening.passes_on:
            alone = yield from self._alone()
            if not alone:
                yield from self._hand_on(task, 0, started, EndOfRound.STRAGGLER)
                return
        while True:
            if task.done_steps >= task.steps:
                self._observe(here, started)
                yield from self._commit(task, final=True)
                return
            boundary = Boundary(
                slice_ms=(env.now - started) * 1000,
                hops=0,
                waiting=self.slots.waiting if pressed else 0,
                draining=instance.draining,
                steps=here,
                pace=judged,
                alone=bool(alone),
            )
            reason = rules.end(boundary)
            if rules.asks_alone(reason, alone):
                alone = yield from self._alone()
                if alone:
                    reason = rules.end(replace(boundary, alone=True))
            if reason is not None:
                self._observe(here, started)
                yield from self._hand_on(task, here, started, reason)
                return
            yield from self._trip(self.lease)
            yield from instance.pool.compute(task.step_work())
            task.done_steps += 1
            task.executed += 1
            instance.steps += 1
            here += 1

    def _alone(self) -> Generator[simpy.Event, Any, bool]:
        yield from self._trip(self.lease)
        return self.redis.board.peers(self.name, self.env.now) == 0

    def _observe(self, here: int, started: float) -> None:
        now = self.env.now
        self.rules.observe(TOOL, here, (now - started) * 1000, now)

    def _hand_on(self, task: Task, here: int, started: float, reason: EndOfRound) -> Generator[simpy.Event, Any, None]:
        elapsed_ms = (self.env.now - started) * 1000
        task.pace, moved = self.rules.checkpoint(task.pace, here, elapsed_ms, reason, self.name)
        task.moves += moved
        task.rounds += 1
        yield from self._commit(task, final=False)
        self.redis.queue.add(task)

    def _commit(self, task: Task, *, final: bool) -> Generator[simpy.Event, Any, None]:
        """The slice's one transaction: checkpoint, acknowledgement, the next slice (queued by the caller)."""
        yield from self._trip(self.slice_end)
        if self.on_commit is not None:
            self.on_commit(task, final)


class TaskClient:
    """Creates a task through the proxy and follows it: pushed changes (the client's default) or polls."""

    def __init__(self, env: simpy.Environment, fleet: Fleet, redis: Redis, cost: TaskCost, *, push: bool = True):
        self.env = env
        self.fleet = fleet
        self.redis = redis
        self.cost = cost
        self.push = push
        self.hop: HopCost = fleet.client.cost
        self._done: dict[Task, simpy.Event] = {}

    def call(self, call: Call) -> Generator[simpy.Event, Any, None]:
        """A SimPy process: one task from its creation to its result seen by the client."""
        assert isinstance(call, Task)
        task = call
        done = self._done[task] = self.env.event()
        yield from self._request(self.cost.task)  # creation, the listen: the task's own round trips
        self.redis.queue.add(task)
        if self.push:
            yield done
        else:
            while not done.triggered:  # `tasks/get` after each `pollIntervalMs`, until one reads it done
                yield self.env.timeout(POLL_MS / 1000)
                yield from self._request(self.cost.poll)
        task.ended = self.env.now
        del self._done[task]

    def _request(self, costs: Costs) -> Generator[simpy.Event, Any, None]:
        """A request through the proxy to the worker it picks, and on to Redis."""
        yield from self.hop.client.compute(costs.client)
        yield from self.hop.proxy.compute(costs.proxy)
        backend = self.fleet.proxy.pool.pick()
        if backend is not None:
            yield from self.fleet.proxy.instances[backend.url].group.compute(costs.worker)
        yield from self.redis.cpu.compute(costs.redis)

    def committed(self, task: Task, final: bool) -> None:
        """A checkpoint landed: with push, the change goes to the client through the proxy."""
        if self.push:
            self.env.process(self._pushed(task, final))
        elif final and task in self._done:
            self._done[task].succeed()

    def _pushed(self, task: Task, final: bool) -> Generator[simpy.Event, Any, None]:
        yield from self.hop.proxy.compute(self.cost.slice.proxy)
        yield from self.hop.client.compute(self.cost.slice.client)
        if final and task in self._done and not self._done[task].triggered:
            self._done[task].succeed()


class TaskFleet:
    """A fleet's task half: one Redis, a runner on every instance, a client that creates and follows tasks."""

    def __init__(self, fleet: Fleet, cost: TaskCost, rng: random.Random, *, push: bool = True) -> None:
        env = fleet.env
        self.fleet = fleet
        self.rng = rng
        cpu = fleet.shared.group("redis") if fleet.shared is not None else Host(env, 1.0).group("redis")
        self.redis = Redis(env, cpu)
        self.cost = cost
        self.client = TaskClient(env, fleet, self.redis, cost, push=push)
        self.runners: list[SliceRunner] = []

    def add(self, *, speed: float = 1.0) -> Instance:
        instance = self.fleet.add(speed=speed)
        runner = SliceRunner(self.fleet.env, instance, self.redis, self.cost, self.fleet.model.worker_step)
        runner.on_commit = self.client.committed
        self.runners.append(runner)
        return instance


def slices_on(tasks: list[Task], instance: str) -> tuple[int, int]:
    """(slices begun on `instance`, slices in all) of `tasks`: the benchmark's "on slow" share."""
    return sum(t.visited.count(instance) for t in tasks), sum(len(t.visited) for t in tasks)
