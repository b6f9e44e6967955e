"""The task side of the straggler rule: a worker that has measured itself slow pulls less.

Slices are pulled, and an idle worker's blocked read is first in line, so a slow worker would take
a task's next slice straight back after putting it on the queue; a task that ran only there carries
its rate as its pace and never moves. So the worker itself has to know it is slow, and pull less:

* `Standing`: this worker's recent step rate per job, weighted over its slices. Each worker's
  heartbeat carries it to the store, beside its name; a worker stepping a job under the straggler
  ratio of its peers' median rate for that job knows it is slow. (The task's own pace cannot tell:
  a task that ran only on the slow worker carries the slow worker's rate.)
* `pull_wait_ms`: such a worker leaves fresh slices to its peers and takes only a slice that has
  waited in the queue for a whole slice length (every faster worker was busy all that time), so it
  still takes work when the fleet needs it, and nothing starves. A lone worker takes everything. Each
  slice it takes refreshes its rate, and a rate not refreshed for `STANDING_STALE_SECONDS` is
  forgotten (it pulls as usual and measures again), so a recovered worker learns it.
* `judge_slice`: a slice taken that late is kept (moving it would only send it to the back of the
  queue the faster workers left it in), and a worker that steps as fast as its peers does not move a
  slice that runs below the task's pace: the whole fleet is slower then (a busy host), and a move
  would only lose the slice its place in the queue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median

STANDING_WEIGHT = 0.5
"""Weight of the newest slice in the standing: a few slices decide, one noisy slice does not."""
STANDING_MIN_SAMPLES = 2
"""Slices of a job measured here before the rate is told to peers or compared with theirs."""
STANDING_STALE_SECONDS = 30.0
"""A standing not refreshed for this long is forgotten: the worker pulls as usual and measures again."""
DEFER_SLICES = 1.0
"""A slow worker takes a slice once it has waited this many slice lengths in the queue."""
POLL_SHARE = 0.25
"""While it defers, a slow worker looks at the queue again after at most this share of the deferral."""


@dataclass
class Standing:
    """This worker's recent step rate per job (steps/s per slice), what its heartbeat tells its peers."""

    rates: dict[str, tuple[float, int, float]] = field(default_factory=dict)
    """job -> (weighted rate, slices folded in, monotonic time of the last one)."""

    def observe(self, job: str, steps: int, elapsed_ms: float, now: float) -> None:
        """Fold in one slice of `job` that ran `steps` here in `elapsed_ms`."""
        if steps <= 0 or elapsed_ms <= 0:
            return
        rate = steps * 1000 / elapsed_ms
        before = self.rates.get(job)
        if before is None or now - before[2] > STANDING_STALE_SECONDS:
            self.rates[job] = (rate, 1, now)
        else:
            self.rates[job] = (STANDING_WEIGHT * rate + (1 - STANDING_WEIGHT) * before[0], before[1] + 1, now)

    def current(self, now: float) -> dict[str, float]:
        """The rates measured recently enough to tell peers (and to compare with theirs)."""
        return {
            job: rate
            for job, (rate, samples, at) in self.rates.items()
            if samples >= STANDING_MIN_SAMPLES and now - at <= STANDING_STALE_SECONDS
        }

    def slow(self, peers: list[dict[str, float]], threshold: float, now: float) -> bool:
        """Whether, on a job both it and its peers ran lately, this worker steps under `threshold` of the peers'
        median rate (0: the rule is off). Rates are per job: a step's cost differs from job to job."""
        return any(self.compare(job, peers, threshold, now) for job in self.current(now))

    def compare(self, job: str, peers: list[dict[str, float]], threshold: float, now: float) -> bool | None:
        """Whether this worker steps `job` under `threshold` of its peers' median rate; None: nothing to compare."""
        mine = self.current(now).get(job)
        theirs = [rates[job] for rates in peers if rates.get(job, 0) > 0]
        if threshold <= 0 or mine is None or not theirs:
            return None
        return mine < threshold * median(theirs)


def judge_slice(*, late: bool, compared: bool | None) -> bool:
    """Whether the per-slice straggler rule (`SheddingPolicy.task_slice_end`) may move this slice.

    `late`: a slow worker took it after its peers left it waiting a whole slice (moving it would only put it
    at the back of that queue again). `compared`: this worker against its peers on the slice's job. When
    it steps as fast as they do, a slice below the task's pace is the whole fleet slowing down (a busy
    host), not this worker: a move would find no faster worker and only lose the slice its place. With
    nothing to compare yet, the task's pace alone decides, as before.
    """
    return not late and compared is not False


def pull_wait_ms(*, slow: bool, peers: int, oldest_age_ms: int | None, slice_ms: float) -> float:
    """How long to wait before taking a slice (0: take the next one now).

    `peers`: other workers taking slices; `oldest_age_ms`: how long the oldest slice nobody has taken
    yet has waited in the queue (None: none waits).
    """
    if not slow or peers == 0:
        return 0.0
    defer = DEFER_SLICES * slice_ms
    poll = max(1.0, POLL_SHARE * defer)
    if oldest_age_ms is None:
        return poll
    if oldest_age_ms >= defer:
        return 0.0
    return min(poll, defer - oldest_age_ms)
