"""The task runner's slice rules, apart from Redis: what `TaskRunner` decides about taking and ending a slice.

The runner asks Redis for facts (its peers' step rates, how long the oldest
waiting slice has waited, whether any other worker takes slices) and acts on
Redis (takes a slice, commits a checkpoint, queues the next one); every
decision in between is made here, by pure methods over those facts. So the
fleet simulator (`lab/mrtr_lab/fleet_sim/tasks.py`) drives this same object, as
it drives `SheddingPolicy` for MRTR rounds, rather than a copy of the rules.

In a slice's life, in order:

* before taking one: `slow` (this worker measured itself under its peers) and
  then `pull_wait_ms` (how long a slow worker leaves fresh slices to them) and
  `late` (a slice it takes after that wait is kept to its end);
* as it begins: `opening` (the pace the per-slice rule judges it by, and
  whether it arrives at the straggler its task fled, to be passed on
  unmeasured unless this worker is alone);
* at each step boundary: `end` (`SheddingPolicy.task_slice_end` with this
  runner's slice length) and, when that names a straggler move nobody asked
  about yet, `asks_alone` (the runner then asks Redis and judges again);
* as it ends: `observe` (the slice's rate into this worker's standing) and
  `checkpoint` (the pace and the move its checkpoint carries).
"""

from __future__ import annotations

from dataclasses import dataclass

from mrtr_protocol.rounds import EndOfRound
from mrtr_worker.compute.policy import Boundary, SheddingPolicy
from mrtr_worker.sealing.layout import Pace
from mrtr_worker.tasks.straggling import Standing, judge_slice, pull_wait_ms


@dataclass(frozen=True)
class Opening:
    """How a slice begins."""

    judged: Pace | None
    """The pace the per-slice straggler rule judges the slice by (None: no straggler move this slice)."""
    passes_on: bool
    """The slice came back to the straggler its task fled: it is handed on before any step, unless no other
    worker takes slices (the runner asks Redis only then)."""


class SliceRules:
    """One worker's slice rules: the shedding policy, its slice length and its standing against its peers."""

    def __init__(self, policy: SheddingPolicy, slice_ms: float) -> None:
        self.policy = policy
        self.slice_ms = float(slice_ms)
        self.standing = Standing()
        """This worker's recent step rates per job, told to peers with each heartbeat."""

    @property
    def turn_after_s(self) -> float:
        """How long the runner waits for a free slot before it queues for one among the calls: one slice."""
        return self.slice_ms / 1000

    def slow(self, peer_rates: list[dict[str, float]] | None, now: float) -> bool:
        """Whether this worker has measured itself well below its peers lately (`peer_rates`: None, not read)."""
        settings = self.policy.settings
        if not settings.enabled or peer_rates is None:
            return False
        return self.standing.slow(peer_rates, settings.straggler_ratio, now)

    def compare(self, job: str, peer_rates: list[dict[str, float]] | None, now: float) -> bool | None:
        """This worker against its peers on `job` (`Standing.compare`); None: nothing to compare yet."""
        settings = self.policy.settings
        if not settings.enabled or peer_rates is None:
            return None
        return self.standing.compare(job, peer_rates, settings.straggler_ratio, now)

    def pull_wait_ms(self, peer_rates: list[dict[str, float]] | None, oldest_age_ms: int | None) -> float:
        """A slow worker's wait before it takes a slice (0: take the next one now); see `straggling.pull_wait_ms`."""
        return pull_wait_ms(slow=True, peers=len(peer_rates or ()), oldest_age_ms=oldest_age_ms, slice_ms=self.slice_ms)

    @staticmethod
    def late(peer_rates: list[dict[str, float]] | None) -> bool:
        """A slow worker that waited and takes a slice now: its peers were all busy, so what it takes it keeps."""
        return bool(peer_rates)

    def opening(
        self,
        pace: Pace | None,
        job: str,
        peer_rates: list[dict[str, float]] | None,
        *,
        late: bool,
        consumer: str,
        now: float,
    ) -> Opening:
        judged = pace if judge_slice(late=late, compared=self.compare(job, peer_rates, now)) else None
        return Opening(judged, self.policy.fled_here(judged, consumer))

    def end(self, boundary: Boundary) -> EndOfRound | None:
        """Why the slice ends at this boundary, or None to run the next step."""
        return self.policy.task_slice_end(boundary, self.slice_ms)

    @staticmethod
    def asks_alone(reason: EndOfRound | None, alone: bool | None) -> bool:
        """Whether the runner must ask whether any other worker takes slices before a straggler move (asked once
        per slice, and only when a move is in view); if none does, `end` judges the boundary again, alone."""
        return reason is EndOfRound.STRAGGLER and alone is None

    def observe(self, job: str, steps: int, elapsed_ms: float, now: float) -> None:
        """Fold a slice's rate into this worker's standing (only for jobs that compute: their steps are work)."""
        self.standing.observe(job, steps, elapsed_ms, now)

    def checkpoint(
        self, pace: Pace | None, steps: int, elapsed_ms: float, reason: EndOfRound, consumer: str
    ) -> tuple[Pace | None, bool]:
        """The pace the slice's checkpoint carries on, and whether the slice is a straggler move."""
        return self.policy.measured_slice(pace, steps, elapsed_ms, reason, consumer), reason is EndOfRound.STRAGGLER
