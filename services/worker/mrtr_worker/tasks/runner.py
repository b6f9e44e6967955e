"""Runs task slices: takes them from the Redis Stream consumer group, steps the job, checkpoints, hands on.

A slice is one run of a task from its last checkpoint for up to `task_slice_ms`. At every step boundary
the runner checks the task's plain status (a cancel stops the job there), renews its lease, asks the job
for questions and asks the shedding policy's `task_slice_end` whether the slice ends (drain, straggler
move, pressure). A slice ends with one transaction that writes the checkpoint, acknowledges the slice and
queues the next one, so the queue always holds exactly the work that remains. What happens when a worker
is killed, frozen, drained or cut off from Redis, and how a slow worker pulls less, is in `docs/tasks.md`
("Where the work runs", "One set of compute slots, and the straggler rule").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from concurrent.futures import BrokenExecutor
from dataclasses import dataclass, replace
from typing import Any, cast

from mcp_types import INTERNAL_ERROR
from redis.exceptions import RedisError, ResponseError

from mrtr_protocol.rounds import EndOfRound
from mrtr_worker.compute.computation import State
from mrtr_worker.compute.engine import COMPUTE_META_KEY
from mrtr_worker.compute.policy import Boundary, SheddingPolicy, SheddingSettings
from mrtr_worker.compute.slots import Slots
from mrtr_worker.lifecycle import Lifecycle
from mrtr_worker.metrics import WorkerMetrics
from mrtr_worker.sealing.layout import Pace
from mrtr_worker.tasks.catalog import JobLookup
from mrtr_worker.tasks.jobs import Job, StepRunner, TaskFailure
from mrtr_worker.tasks.leases import Check, Lease, SliceLeases
from mrtr_worker.tasks.presence import Dead, Presence, new_incarnation
from mrtr_worker.tasks.record import TaskRecord, UnreadableRecord
from mrtr_worker.tasks.slicing import SliceRules
from mrtr_worker.tasks.store import GROUP, Slice, Stored, TaskStore, now_ms
from mrtr_worker.tasks.straggling import Standing
from mrtr_worker.tasks.wire import Status
from mrtr_worker.tool_api.rounds import WorkerInstance

logger = logging.getLogger(__name__)

_BACKOFF_SECONDS = 0.5


_ADOPT_MAX = 1000
"""At start, slices a previous incarnation of this worker (same name) left pending that are put back at once."""


def _step_failure(job: Job, exc: BaseException) -> TaskFailure:
    logger.error("job %s failed: %s: %s", job.name, type(exc).__name__, exc)
    return TaskFailure(INTERNAL_ERROR, f"the {job.name} job failed ({type(exc).__name__})")


def run_limit_failure(run_ms: int, limit_ms: int) -> TaskFailure:
    """A task that ran past the fleet's run-time limit: failed, saying which limit and how to raise it."""
    return TaskFailure(
        INTERNAL_ERROR,
        f"the task ran {run_ms / 1000:.1f} s without finishing, past the run-time limit of {limit_ms / 1000:g} s "
        "(MRTR_WORKER_TASK_MAX_RUN_MS, or the job's own)",
        {"reason": "run_time_limit", "limitMs": limit_ms, "ranMs": run_ms},
    )


class _HeldSlot:
    """A compute slot taken in the line for one slice (`TaskRunner._take_a_turn`), released once by whichever path
    ends the slice; true while it is held."""

    def __init__(self, slots: Slots | None) -> None:
        self._slots = slots

    def __bool__(self) -> bool:
        return self._slots is not None

    def release(self) -> None:
        if self._slots is not None:
            self._slots.release()
            self._slots = None


@dataclass(frozen=True)
class RunnerParts:
    """The worker's objects a task runner works with, built once (`worker.py`)."""

    store: TaskStore
    identity: WorkerInstance
    lifecycle: Lifecycle
    steps: StepRunner
    """Where a job's compute steps run: the engine's step processes."""
    metrics: WorkerMetrics
    jobs: JobLookup
    policy: SheddingPolicy | None = None
    """The engine's (`Engine.policy`); without it (a bare runner in tests) the straggler rule is off."""
    slots: Slots | None = None
    """The engine's compute slots (`Engine.slots`); without them slices take no slot."""


@dataclass(frozen=True)
class RunnerTiming:
    """How a runner paces its work (the worker's `MRTR_WORKER_TASK_*` settings)."""

    concurrency: int
    """Slices run at once."""
    slice_ms: int
    lease_ms: int
    poll_ms: int
    beat_ms: int = 200
    """How often the runner's heartbeat says it is alive, and looks for dead workers' slices."""
    dead_ms: int = 1000
    """How long a silent worker still counts as alive."""
    max_run_ms: int = 0
    """The run-time limit of a task (0: none)."""
    history_max: int = 0
    """Entries kept in the history stream of begins and commits (0: none written)."""


class TaskRunner:
    def __init__(self, parts: RunnerParts, timing: RunnerTiming, *, incarnation: str | None = None) -> None:
        """`incarnation`: the one in the client name of the store's connections (`tasks.presence.client_name`),
        so peers see this process's death in Redis."""
        store, identity = parts.store, parts.identity
        beat_ms, dead_ms, history_max = timing.beat_ms, timing.dead_ms, timing.history_max
        self._store = store
        self._jobs = parts.jobs
        self._leases = SliceLeases(store, group=GROUP, history_max=history_max)
        self._presence = Presence(
            store,
            group=GROUP,
            consumer=identity.instance_id,
            incarnation=incarnation or new_incarnation(),
            dead_ms=dead_ms,
        )
        self._beat_ms = beat_ms
        self._max_run_ms = timing.max_run_ms
        self._adopted = asyncio.Event()
        """Set once what a previous process under this name left pending was put back: only then does it take any."""
        self._orphans: list[Dead] = []
        """Workers seen dead that still hold slices, as of the last heartbeat round: taken before fresh slices."""
        self._beating_since: float | None = None
        """Since when (monotonic) this worker's heartbeats have gone through without a failure or a long gap."""
        self._last_beat = 0.0
        self._policy = parts.policy or SheddingPolicy(SheddingSettings(straggler_ratio=0))
        self._slots = parts.slots
        self._identity = identity
        self._lifecycle = parts.lifecycle
        self._step_runner = parts.steps
        self._metrics = parts.metrics
        self._capacity = asyncio.Semaphore(timing.concurrency)
        self._slice_ms = float(timing.slice_ms)
        self._lease_ms = timing.lease_ms
        self._poll_ms = min(timing.poll_ms, 1000)
        self._stopping = False
        self._loops: list[asyncio.Task[None]] = []
        self._running: set[asyncio.Task[None]] = set()
        self.last_error: str | None = None
        """Why the store was unreachable the last time the runner tried, or None once it works again."""
        self.held_back = False
        """True while the runner takes no slice because every compute slot here is busy."""
        self._held_since: float | None = None
        """Since when (monotonic) the runner has found no slot for a slice; None once a slice got one."""
        self.rules = SliceRules(self._policy, self._slice_ms)
        """Every decision about taking and ending a slice (pure: the fleet simulator drives the same object)."""
        self._peer_rates: list[dict[str, float]] | None = None
        """The other live workers' rates, as of the last heartbeat (None: not read yet)."""

    @property
    def standing(self) -> Standing:
        """This worker's recent step rates per job, told to peers with each heartbeat."""
        return self.rules.standing

    @property
    def consumer(self) -> str:
        return self._identity.instance_id

    @property
    def running_slices(self) -> int:
        return len(self._running)

    async def start(self) -> None:
        self._loops = [
            asyncio.create_task(self._consume()),
            asyncio.create_task(self._reclaim()),
            asyncio.create_task(self._watch()),
        ]

    async def stop(self, grace_seconds: float = 30.0) -> None:
        """Take no more slices; running ones requeue at their next step boundary."""
        self._stopping = True
        for loop in self._loops:
            loop.cancel()
        for loop in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        if self._running:
            await asyncio.wait(self._running, timeout=grace_seconds)
        with contextlib.suppress(RedisError, OSError):
            await self._presence.leave()  # anything still held moves on now, not after the heartbeat expires

    def _paused(self) -> bool:
        return self._stopping or self._lifecycle.draining

    def _failed(self, exc: BaseException) -> None:
        message = f"{type(exc).__name__}: {exc}"
        if self.last_error != message:
            logger.warning("task store unreachable: %s", message)
        self.last_error = message

    async def _consume(self) -> None:
        group_ready = False
        await self._adopted.wait()
        while not self._stopping:
            if self._lifecycle.draining:
                await asyncio.sleep(self._poll_ms / 1000)
                continue
            if self._slots is not None and not self._slots.available:
                self.held_back = True  # the slices wait in the queue for a worker with a free slot
                try:
                    # Turn after turn while slices wait; a slow worker leaves them to its peers and waits a while again.
                    if not await self._slot_freed(self._slots) and (
                        self.slow() or not await self._take_a_turn(self._slots)
                    ):
                        self._held_since = None
                finally:
                    self.held_back = False
                continue
            late = False
            slow = self.slow()
            self._metrics.task_straggling.set(slow)
            if group_ready and slow:
                try:
                    wait_ms = await self._pull_wait_ms()
                except (RedisError, OSError) as exc:
                    self._failed(exc)
                    await asyncio.sleep(_BACKOFF_SECONDS)
                    continue
                if wait_ms > 0:
                    self._metrics.task_pull_waits.inc()
                    await asyncio.sleep(wait_ms / 1000)
                    continue
                late = self.rules.late(self._peer_rates)  # peers were all busy a whole slice: it keeps what it takes
            await self._capacity.acquire()
            try:
                if not group_ready:
                    await self._store.ensure_group()
                    group_ready = True
                taken = await self._orphan() if self._orphans else None  # a dead worker's slice goes first
                if taken is None:
                    taken = await self._store.take(self.consumer, 1 if late else self._poll_ms)
                self.last_error = None
            except (RedisError, OSError) as exc:
                self._capacity.release()
                if isinstance(exc, ResponseError) and "NOGROUP" in str(exc):
                    group_ready = False  # Redis lost its data: recreate the group
                self._failed(exc)
                await asyncio.sleep(_BACKOFF_SECONDS)
                continue
            except BaseException:
                self._capacity.release()
                raise
            if taken is None:
                self._capacity.release()
                continue
            self._spawn(taken, late=late)

    async def _slot_freed(self, slots: Slots) -> bool:
        """Wait for a free slot nobody is queued for: whether one came before the runner's patience ran out
        (`SliceRules.turn_after_s`, counted from when it was first held back, not from the last slot freed: calls
        that churn through the slots would otherwise restart it forever)."""
        now = time.monotonic()
        if self._held_since is None:
            self._held_since = now
        patience = self.rules.turn_after_s - (now - self._held_since)
        if patience <= 0:
            return False
        try:
            await asyncio.wait_for(slots.wait_available(), patience)
        except TimeoutError:
            return False
        return True

    async def _take_a_turn(self, slots: Slots) -> bool:
        """Calls kept every slot here busy for a whole slice: if slices wait, queue for a slot among the calls
        (quietly: a running computation is not asked to yield it) and run one slice in it; whether it did.
        Without turns, a fleet overloaded with calls would never start a task (docs/tasks.md)."""
        try:
            await self._store.ensure_group()
            if await self._store.oldest_waiting_ms() is None:
                return False
        except (RedisError, OSError) as exc:
            self._failed(exc)
            return False
        await self._capacity.acquire()
        taken: Slice | None = None
        try:
            await slots.acquire(quiet=True)
            try:
                if not self._paused():  # a drain may have begun while it waited in the line
                    taken = await self._orphan() if self._orphans else None
                    if taken is None:
                        taken = await self._store.take(self.consumer, 1)
            finally:
                if taken is None:
                    slots.release()
        except (RedisError, OSError) as exc:
            self._failed(exc)
        finally:
            if taken is None:
                self._capacity.release()
        if taken is None:
            return False
        self._metrics.task_slices.labels(outcome="turn").inc()
        self._spawn(taken, holding_slot=True)
        return True

    @property
    def peer_rates(self) -> list[dict[str, float]] | None:
        """The other live workers' step rates per job, as of the last heartbeat (None: not read yet)."""
        return self._peer_rates

    def slow(self) -> bool:
        """Whether this worker has measured itself well below its peers lately (the straggler rule's ratio)."""
        return self.rules.slow(self._peer_rates, time.monotonic())

    async def _pull_wait_ms(self) -> float:
        return self.rules.pull_wait_ms(self._peer_rates, await self._store.oldest_waiting_ms())

    async def _reclaim(self) -> None:
        await self._adopted.wait()
        while not self._stopping:
            if not self._paused():  # a draining worker stops saying so: it takes no more slices
                with contextlib.suppress(RedisError, OSError):  # the reclaim below meets the same trouble
                    await self._store.heartbeat(self.consumer, self.standing.current(time.monotonic()))
                    self._peer_rates = await self._store.peer_rates(self.consumer, self._lease_ms)
            await asyncio.sleep(max(0.2, self._lease_ms / 4000))
            while not self._paused() and not self._capacity.locked() and self._free_slot():
                await self._capacity.acquire()
                try:
                    slices = await self._store.reclaim(self.consumer, self._lease_ms, count=1)
                except (RedisError, OSError) as exc:
                    self._capacity.release()
                    self._failed(exc)
                    break
                if not slices:
                    self._capacity.release()
                    break
                logger.info("taking over slice %s of task %s (lease expired)", slices[0].message_id, slices[0].task_id)
                self._metrics.task_slices.labels(outcome="reclaimed").inc()
                self._spawn(slices[0])

    async def _watch(self) -> None:
        """Beat every `beat_ms`, and claim at once the slices of workers seen dead (`tasks.presence`)."""
        while not self._stopping:
            try:
                if not self._adopted.is_set():
                    await self._store.ensure_group()
                    await self._adopt()
                    self._adopted.set()
                await self._presence.beat()
                beat = time.monotonic()
                if self._beating_since is None or (beat - self._last_beat) * 1000 > self._presence.dead_ms:
                    self._beating_since = beat  # a gap (an outage, a failover, a stall here): judge no one for a while
                self._last_beat = beat
                if not self._paused() and self._judging():
                    await self._take_over_dead()
            except (RedisError, OSError):
                self._beating_since = None  # after an outage, every worker needs a beat before it is judged
            except Exception:  # a bug here must not stop the heartbeat for good: peers would take this worker for dead
                logger.exception("task heartbeat or takeover failed")
            await asyncio.sleep(self._beat_ms / 1000)

    def _judging(self) -> bool:
        """Whether this worker's own heartbeat has gone through for a whole `dead_ms` (see `tasks.presence`)."""
        since = self._beating_since
        return since is not None and (time.monotonic() - since) * 1000 >= self._presence.dead_ms

    async def _adopt(self) -> None:
        """Slices a previous process under this name left pending (it died; this is its restart): put back now."""
        seen = cast(str | None, await self._store.client.get(self._presence.alive_key(self.consumer)))
        if seen == self._presence.incarnation:
            return
        taken = await self._presence.take_over(Dead(self.consumer, seen or "", 0), _ADOPT_MAX)
        for orphan in taken:
            await self._store.put_back(orphan)
        if taken:
            logger.info("put back %d slice(s) a previous process named %s left pending", len(taken), self.consumer)

    async def _take_over_dead(self) -> None:
        """Claim the slices of workers seen dead while this one has room; otherwise they are `_orphans`, which the
        consume loop takes before any fresh slice as soon as room frees (a saturated fleet would leave them behind
        every slice in the queue, and the dead worker's tasks would wait for it to drain)."""
        self._orphans = await self._presence.dead()
        while self._orphans and not self._paused() and not self._capacity.locked() and self._free_slot():
            await self._capacity.acquire()
            try:
                taken = await self._orphan()
            except BaseException:
                self._capacity.release()
                raise
            if taken is None:
                self._capacity.release()
                break
            self._spawn(taken)

    async def _orphan(self) -> Slice | None:
        """One slice of a worker seen dead, claimed for this one (the caller holds a unit of capacity)."""
        while self._orphans:
            dead = self._orphans[0]
            slices = await self._presence.take_over(dead, 1)
            if not slices:
                self._orphans.pop(0)  # none left (claimed by others, or it came back)
                continue
            logger.info(
                "taking over slice %s of task %s (%s seen dead)", slices[0].message_id, slices[0].task_id, dead.consumer
            )
            self._metrics.task_takeovers.inc()
            self._metrics.task_slices.labels(outcome="taken_over").inc()
            return slices[0]
        return None

    def _free_slot(self) -> bool:
        return self._slots is None or self._slots.available

    def _spawn(self, taken: Slice, *, late: bool = False, holding_slot: bool = False) -> None:
        task = asyncio.create_task(self._run(taken, late=late, holding_slot=holding_slot))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, taken: Slice, *, late: bool, holding_slot: bool = False) -> None:
        try:
            with self._lifecycle.busy():
                await self._run_slice(taken, late=late, holding_slot=holding_slot)
        except (RedisError, OSError) as exc:
            self._failed(exc)  # not acknowledged: the slice comes back after its lease, from the last checkpoint
        except Exception:
            logger.exception("slice %s of task %s failed", taken.message_id, taken.task_id)
        finally:
            self._capacity.release()

    async def _run_slice(self, taken: Slice, *, late: bool = False, holding_slot: bool = False) -> None:
        """Run one slice; `late`: a slow worker took it after its peers left it waiting (no straggler move);
        `holding_slot`: it took a compute slot in the line already (`_take_a_turn`), released here."""
        held = _HeldSlot(self._slots if holding_slot else None)
        try:
            await self._slice_in(taken, late=late, held=held)
        finally:
            held.release()

    async def _slice_in(self, taken: Slice, *, late: bool, held: _HeldSlot) -> None:
        store = self._store
        try:
            begun = await self._leases.begin(taken, self.consumer)
        except UnreadableRecord as exc:
            # A layout (or key) this version does not have yet: another instance may (a rolling upgrade).
            await self._leave_to_others(taken, f"record unreadable here ({exc})")
            return
        if isinstance(begun, Check):  # stale (expired, cancelled, paused, moved on: acknowledged) or taken by another
            self._metrics.task_slices.labels(outcome=begun.value).inc()
            return
        lease, stored = begun
        job = self._jobs(stored.record.job)
        if job is None:
            # A job a newer version added (expand/contract: every version learns it before any creates it, so a
            # fleet mid-upgrade), or a pack's that is not installed here: leave the slice to an instance that knows it.
            why = f"job {stored.record.job!r} unknown to version {self._identity.version} (no installed pack has it)"
            await self._leave_to_others(taken, why)
            return
        slots = self._slots if job.computes else None
        turn = bool(held)  # a slot taken in the line buys a whole slice: calls queued behind it do not end it
        if slots is None:
            held.release()  # a job that does not compute needs no slot
        elif not held:
            if not slots.try_acquire():
                # The slots filled (MRTR calls) since the queue was read: leave the slice to a worker with a free one.
                await store.put_back(taken)
                self._metrics.task_slices.labels(outcome="busy").inc()
                return
            held = _HeldSlot(slots)
            self._held_since = None
        record = stored.record.visit(self._identity.instance_id, self._identity.version)
        if slots is None:
            await self._steps(stored, record, job, lease, pressed=False, late=late)
            return
        self._metrics.task_slots.inc()
        try:
            await self._steps(stored, record, job, lease, pressed=not turn, late=late)
        finally:
            self._metrics.task_slots.dec()
            held.release()

    async def _leave_to_others(self, taken: Slice, why: str) -> None:
        logger.warning("task %s: slice left to other instances: %s", taken.task_id, why)
        self._metrics.task_slices.labels(outcome="left").inc()
        # Redis hands a new entry to the consumer blocked longest. This worker's loop blocked again the moment it
        # took the slice; a fixed wait here put the slice back at the same point of every poll, so it always came
        # back here and a peer that knows the job starved. A wait drawn anew each time breaks the lockstep.
        poll = self._poll_ms / 1000
        await asyncio.sleep(max(_BACKOFF_SECONDS, poll) + random.uniform(0, poll))
        await self._store.put_back(taken)

    async def _steps(
        self, stored: Stored, record: TaskRecord, job: Job, lease: Lease, *, pressed: bool, late: bool = False
    ) -> None:
        """`pressed`: calls queued for a slot here end the slice after the minimum slice (pressure)."""
        state, steps = record.state, record.steps
        started = lease.started
        here = 0  # steps in this slice: the pace this instance keeps
        alone: bool | None = None  # asked of Redis once per slice, and only when a move is in view
        opening = self.rules.opening(
            record.pace, job.name, self._peer_rates, late=late, consumer=self.consumer, now=time.monotonic()
        )
        judged = opening.judged  # None: no straggler move this slice
        if opening.passes_on and not (alone := await self._alone()):
            await self._hand_on(stored, record, state, steps, 0, started, EndOfRound.STRAGGLER, lease)
            return
        while True:
            questions = job.questions(state)
            if questions and not record.can_ask:
                # The client cannot answer forms: proceed as if each question were declined.
                for key in questions:
                    declined = job.answer(state, key, {"action": "decline"})
                    if declined is None:
                        failure = TaskFailure(INTERNAL_ERROR, f"the job needs an answer to {key!r}")
                        await self._finish(stored, replace(record, state=state, steps=steps), failure, lease)
                        return
                    state = declined
                continue
            if questions:
                self._observe(job, here, started)
                pace = self._measured(record, here, started, EndOfRound.INPUT)
                paused = replace(record, state=state, steps=steps, pace=pace).asking(questions, now_ms())
                await self._commit(stored, paused, lease)
                return
            if job.done(state):
                self._observe(job, here, started)
                await self._finish(stored, replace(record, state=state, steps=steps), None, lease, job)
                return
            ran_ms = stored.record.run_ms + int((time.monotonic() - started) * 1000)
            limit_ms = min((ms for ms in (self._max_run_ms, job.max_run_ms) if ms > 0), default=0)
            if limit_ms and ran_ms >= limit_ms:
                failure = run_limit_failure(ran_ms, limit_ms)
                await self._finish(stored, replace(record, state=state, steps=steps), failure, lease)
                return
            boundary = Boundary(
                slice_ms=(time.monotonic() - started) * 1000,
                hops=0,
                waiting=self._slots.waiting if pressed and self._slots is not None else 0,
                draining=self._paused(),
                steps=here,
                pace=judged,
                alone=bool(alone),
            )
            reason = self.rules.end(boundary)
            if self.rules.asks_alone(reason, alone) and (alone := await self._alone()):
                reason = self.rules.end(replace(boundary, alone=True))
            if reason is not None:
                self._observe(job, here, started)
                await self._hand_on(stored, record, state, steps, here, started, reason, lease)
                return
            held = await self._leases.check(lease, self.consumer, stored.rev)
            if held is not Check.HELD:  # cancelled, or taken by another worker: stop at this boundary
                self._dropped(held, here)
                return
            try:
                state = await job.advance(state, self._step_runner)
            except (BrokenExecutor, RedisError, OSError, asyncio.CancelledError):
                raise  # this instance's trouble, not the job's: the slice comes back after its lease
            except (Exception, SystemExit) as exc:  # the job's own failure (a TaskFailure, a bug, an exit): it fails
                failure = exc if isinstance(exc, TaskFailure) else _step_failure(job, exc)
                await self._finish(stored, replace(record, state=state, steps=steps), failure, lease)
                return
            steps += 1
            here += 1

    def _dropped(self, check: Check, steps: int) -> None:
        """A slice this worker gives up without committing: its steps are discarded, never counted."""
        self._metrics.task_slices.labels(outcome=check.value).inc()
        if steps:
            self._metrics.task_steps_discarded.labels(reason=check.value).inc(steps)
        if check is Check.FENCED:
            logger.info("slice fenced: another worker took it; %d step(s) here discarded", steps)

    def _observe(self, job: Job, here: int, started: float) -> None:
        """Fold a slice's rate into this worker's standing (only jobs that compute: their steps are work)."""
        if job.computes:
            now = time.monotonic()
            self.rules.observe(job.name, here, (now - started) * 1000, now)

    async def _alone(self) -> bool:
        """Whether no other worker could take a slice put back now (then the straggler rule has nowhere to go)."""
        return await self._store.peers(self.consumer, self._lease_ms) == 0

    def _measured(self, record: TaskRecord, here: int, started: float, reason: EndOfRound) -> Pace | None:
        elapsed_ms = (time.monotonic() - started) * 1000
        return self._policy.measured_slice(record.pace, here, elapsed_ms, reason, self.consumer)

    async def _hand_on(
        self,
        stored: Stored,
        record: TaskRecord,
        state: State,
        steps: int,
        here: int,
        started: float,
        reason: EndOfRound,
        lease: Lease,
    ) -> None:
        """End the slice at this boundary: checkpoint, with the pace it measured, and queue the next slice."""
        elapsed_ms = (time.monotonic() - started) * 1000
        me = self._identity.instance_id
        pace, moved = self.rules.checkpoint(record.pace, here, elapsed_ms, reason, me)
        if moved and here == 0:
            message = f"{steps} steps done; passed on by {me}, a straggler it left before"
        elif moved:
            reference = record.pace.rate if record.pace is not None else 0.0
            rate = here * 1000 / elapsed_ms if elapsed_ms > 0 else 0.0
            message = f"{steps} steps done; moved off {me}: {rate:.1f} steps/s here, {reference:.1f} before"
        else:
            message = f"{steps} steps done; last slice on {me}"
            if reason in (EndOfRound.PRESSURE, EndOfRound.DRAIN):
                message += f" ({reason.value})"
        if moved:
            logger.info("task %s: %s", record.task_id, message)
        logger.debug(
            "slice task=%s on=%s steps=%d here=%d ms=%.0f reason=%s pace=%s",
            record.task_id[:8],
            me,
            steps,
            here,
            elapsed_ms,
            reason.value,
            record.pace.wire() if record.pace is not None else None,
        )
        checkpoint = replace(
            record,
            state=state,
            steps=steps,
            status_message=message,
            pace=pace,
            moves=record.moves + moved,
        ).moved(Status.WORKING, now_ms())
        outcome = {EndOfRound.STRAGGLER: "straggler", EndOfRound.PRESSURE: "pressure"}.get(reason, "requeued")
        await self._commit(stored, checkpoint, lease, requeue=True, outcome=outcome)

    async def _finish(
        self, stored: Stored, record: TaskRecord, failure: TaskFailure | None, lease: Lease, job: Job | None = None
    ) -> None:
        now = now_ms()
        me = self._identity.instance_id
        if failure is None and job is not None:
            try:
                result = dict(job.result(record.state))
            except Exception as raised:  # a TaskFailure by design, anything else a bug: failed either way
                failure = raised if isinstance(raised, TaskFailure) else _step_failure(job, raised)
            else:
                meta: dict[str, Any] = dict(result.get("_meta") or {})
                meta[COMPUTE_META_KEY] = {
                    "steps": record.steps,
                    "slices": record.slices,
                    "visited": record.visited,
                    "moves": record.moves,
                }
                result["_meta"] = meta
                # The last slice's message ("29 steps done; last slice on w2") would be stale beside the result.
                message = f"{record.steps} steps done; completed on {me}"
                done = record.moved(Status.COMPLETED, now, result=result, status_message=message)
                await self._commit(stored, done, lease)
                return
        assert failure is not None
        message = f"{record.steps} steps done; failed on {me}"
        failed = record.moved(Status.FAILED, now, error=failure.error(), status_message=message)
        await self._commit(stored, failed, lease)

    async def _commit(
        self, stored: Stored, record: TaskRecord, lease: Lease, *, requeue: bool = False, outcome: str = "requeued"
    ) -> None:
        """Commit the slice (fenced: only if this worker still holds it); its steps count only if it lands."""
        started = time.perf_counter()
        ran_ms = int((time.monotonic() - lease.started) * 1000)
        record = replace(record, run_ms=stored.record.run_ms + ran_ms)
        here = record.steps - stored.record.steps
        landed = await self._leases.commit(lease, self.consumer, stored, record, requeue=requeue)
        if landed is not Check.HELD:  # another worker took the slice, or the task moved on (a cancel)
            self._dropped(landed, here)
            return
        self._metrics.task_checkpoint_seconds.observe(time.perf_counter() - started)
        self._metrics.task_slices.labels(outcome=outcome if requeue else record.status.value).inc()
        if here:
            self._metrics.compute_steps.labels(tool=record.job).inc(here)
