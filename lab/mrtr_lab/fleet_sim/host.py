"""A machine's CPU: processor sharing of its cores among the jobs that can run, in simulated time.

Why sharing and not a queue: on the real cluster every worker's step
processes, its main process, the proxy and the client are OS processes on
the same two cores, and the kernel shares the cores among whatever is
runnable. Six steps on two cores each run at a third of their speed; a
worker stopped by SIGSTOP (the quarter-speed instance) gives its share to
the others. So a job here is CPU work in seconds at full speed, and each
runnable job progresses at `speed x min(1, cores / runnable jobs)`.

Jobs belong to groups (OS processes that share a fate and a priority: a
worker's main process, its step pool, the proxy, the client); a group can be
slowed (`speed`, a throttled container) or stopped (speed 0: SIGSTOP, a
garbage-collection pause). Each group keeps a virtual clock of the work one
of its jobs has received, so adding or finishing a job costs O(groups), not
O(jobs), and one timer per host wakes the earliest job.

The kernel does not share equally: CFS gives each runnable process a share
of the cores in proportion to the weight of its nice level, and no process
more than one core. The worker's step processes run at nice 10
(`mrtr_worker.compute.pool_process.STEP_NICENESS`: weight 110 against 1024
for nice 0), so a starting worker, the worker's own event loop, the proxy
and the client take the cores from the steps nearly at once. A group's
`weight` is that of its nice level, and the shares are filled by weight up
to one core per job (water-filling).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

EPSILON = 1e-9
"""A nanosecond of work: float error in the virtual clocks, never a difference that matters."""
NICE_0 = 1024
"""CFS's weight of a process at nice 0 (`sched_prio_to_weight` in the kernel)."""
NICE_WEIGHTS = {0: NICE_0, 5: 335, 10: 110, 19: 15}
"""CFS's weights of the nice levels this model uses (the kernel's table, each level about 1.25 times the next)."""


@dataclass(eq=False)
class Group:
    """Jobs that share a fate: stopped together, slowed together."""

    host: Host
    name: str
    speed: float = 1.0
    weight: float = NICE_0
    """CFS's weight of the group's nice level: its jobs' claim on the cores against the others'."""
    luck: float = 1.0
    """How far the kernel's per-core run queues favour the group just now (`Host.set_luck`, `uneven_share.py`):
    its claim is `weight x luck x lift`."""
    lift: float = 1.0
    """How far being polled raises the group's claim just now (`Host.set_lift`, `polled_lift.py`)."""
    virtual: float = 0.0
    """Work (CPU seconds) each runnable job of this group has received since the group was made."""
    jobs: list[tuple[float, int, simpy.Event]] = field(default_factory=list)
    """(virtual time the job is done, order, its event), a heap."""

    @property
    def claim(self) -> float:
        """Each job's claim on the cores against the others'."""
        return self.weight * self.luck * self.lift

    def run(self, work: float) -> simpy.Event:
        """An event that succeeds once `work` CPU seconds have been given to this job."""
        return self.host.run(self, work)

    def compute(self, work: float) -> Generator[simpy.Event, Any, None]:
        """Wait (`yield from`) until `work` CPU seconds have been given to this job."""
        yield self.host.run(self, work)

    def set_speed(self, speed: float) -> None:
        self.host.set_speed(self, speed)

    def set_lift(self, lift: float) -> None:
        self.host.set_lift(self, lift)

    def stop(self) -> None:
        """The process is gone: its unfinished jobs never finish (a kill), its share goes to the others."""
        self.host.remove(self)


class Host:
    def __init__(self, env: simpy.Environment, cores: float) -> None:
        self.env = env
        self.cores = cores
        self.groups: list[Group] = []
        self._at = 0.0
        self._shares: dict[int, float] = {}
        """Work per second each runnable job of a group gets at speed 1 (by the group's `id`): its weighted share
        of the cores, at most one core."""
        self._order = itertools.count()
        self._due = float("inf")
        self._timer = 0
        self.busy = 0.0
        """CPU seconds given so far (all jobs): what the utilisation figures read."""

    def group(self, name: str, speed: float = 1.0, nice: int = 0) -> Group:
        made = Group(self, name, speed, NICE_WEIGHTS[nice])
        self.groups.append(made)
        return made

    def remove(self, group: Group) -> None:
        """Forget a group whose process is gone; its unfinished jobs never finish (a kill)."""
        self._advance()
        if group in self.groups:
            self.groups.remove(group)
        group.jobs.clear()
        self._settle()

    def run(self, group: Group, work: float) -> simpy.Event:
        self._advance()
        done = self.env.event()
        heapq.heappush(group.jobs, (group.virtual + max(work, 0.0), next(self._order), done))
        self._settle()
        return done

    def set_speed(self, group: Group, speed: float) -> None:
        self._advance()
        group.speed = speed
        self._settle()

    def set_luck(self, lucks: dict[int, float]) -> None:
        """New draws of the groups' luck (by `id`), all at one moment."""
        self._advance()
        for group in self.groups:
            group.luck = lucks.get(id(group), group.luck)
        self._settle()

    def set_lift(self, group: Group, lift: float) -> None:
        """The group's claim raised by `lift` (1: as the others') from now on."""
        self._advance()
        group.lift = lift
        self._settle()

    def _advance(self) -> None:
        """Give every runnable job its work since the last change."""
        now = self.env.now
        elapsed = now - self._at
        if elapsed > 0:
            for group in self.groups:
                if group.jobs and group.speed > 0:
                    given = elapsed * self._shares.get(id(group), 1.0) * group.speed
                    group.virtual += given
                    self.busy += given * len(group.jobs)
        self._at = now

    def _settle(self) -> None:
        """Finish the jobs that are done, recompute the share, and set the timer for the next one."""
        for group in self.groups:
            while group.jobs and group.jobs[0][0] <= group.virtual + EPSILON:
                heapq.heappop(group.jobs)[2].succeed()
        self._shares = shares(self.groups, self.cores)
        due = float("inf")
        for group in self.groups:
            if group.jobs and group.speed > 0:
                rate = self._shares[id(group)] * group.speed
                due = min(due, self.env.now + (group.jobs[0][0] - group.virtual) / rate)
        if due < self._due - EPSILON:
            self._arm(due)
        # A timer armed for earlier than the new due fires, finds nothing done and re-arms: harmless.

    def _arm(self, due: float) -> None:
        self._due = due
        self._timer += 1
        if due == float("inf"):
            return
        ticket = self._timer
        timer = self.env.timeout(max(0.0, due - self.env.now))
        timer.callbacks.append(lambda _: self._wake(ticket))

    def _wake(self, ticket: int) -> None:
        if ticket != self._timer:
            return  # a later change re-armed the host
        self._due = float("inf")
        self._advance()
        self._settle()


def shares(groups: list[Group], cores: float) -> dict[int, float]:
    """Each runnable group's share per job (by `id`): the cores split in proportion to the jobs' weights, no
    job above one core, what a capped job leaves over going to the others (as CFS balances runnable tasks
    across cores). A stopped group (speed 0) is not runnable."""
    runnable = sorted((g for g in groups if g.jobs and g.speed > 0), key=lambda g: -g.claim)
    found: dict[int, float] = {}
    left_cores = cores
    left_weight = sum(g.claim * len(g.jobs) for g in runnable)
    for group in runnable:  # the heaviest first: if any job is capped at one core, theirs are
        per_weight = left_cores / left_weight if left_weight > 0 else 0.0
        share = min(1.0, group.claim * per_weight)
        found[id(group)] = share
        left_cores -= share * len(group.jobs)
        left_weight -= group.claim * len(group.jobs)
    return found


class Dedicated:
    """A group with cores of its own, at least one per job it ever runs at once (an instance with a core per
    compute slot): nothing shares, so a job of `work` takes `work / speed`, stretched by any pause it meets.

    The study's thousand instances run here: one timer per job and no sharing arithmetic. A pause (speed 0)
    is accounted for when a job's timer fires: the time it spent paused is run again.
    """

    def __init__(self, env: simpy.Environment, name: str, speed: float = 1.0) -> None:
        self.env = env
        self.name = name
        self.speed = speed
        self.busy = 0.0
        self._paused_total = 0.0
        self._paused_at: float | None = None
        self._resumed: simpy.Event | None = None
        self.gone = False

    def stop(self) -> None:
        """The process is gone: jobs in progress never finish (a kill)."""
        self.gone = True

    def paused_time(self) -> float:
        ongoing = self.env.now - self._paused_at if self._paused_at is not None else 0.0
        return self._paused_total + ongoing

    def set_lift(self, lift: float) -> None:
        """Nothing: with cores of its own, a claim against the others' changes nothing."""

    def set_speed(self, speed: float) -> None:
        if speed == 0 and self._paused_at is None:
            self._paused_at = self.env.now
            self._resumed = self.env.event()
        elif speed > 0 and self._paused_at is not None:
            self._paused_total += self.env.now - self._paused_at
            self._paused_at = None
            resumed, self._resumed = self._resumed, None
            if resumed is not None:
                resumed.succeed()
        if speed > 0:
            self.speed = speed

    def compute(self, work: float) -> Generator[simpy.Event, Any, None]:
        remaining = work
        while remaining > EPSILON:
            if self._resumed is not None:
                yield self._resumed
            before = self.paused_time()
            yield self.env.timeout(remaining / self.speed)
            if self.gone:
                yield self.env.event()  # never: the process is gone
            remaining = (self.paused_time() - before) * self.speed
        self.busy += work


Cpu = Group | Dedicated
"""Where a process's work runs: a share of a host's cores, or cores of its own."""
