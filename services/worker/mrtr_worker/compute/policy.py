"""The shedding policy: when a computation is handed back to its client instead of running on.

All decisions are made at step boundaries, so a hand-back never loses more
than the step in progress (and a drain takes at most one step):

* admission: beyond `max_concurrent` running computations a new call is
  handed back at once with its initial state (no work lost, no error);
* pressure: while a call waits here for a slot, a computation that has run
  its minimum slice yields;
* time slice: a computation yields after `max_slice` even on an idle worker
  (0 turns it off), which bounds the work lost if this instance dies;
* drain: every computation yields at its next boundary;
* fairness: a request already handed back `priority_after_hops` times is
  not shed again (except by a drain or a straggler move): it waits for a
  slot here instead, so no request starves and clients with a round cap
  still finish;
* straggler: the sealed state carries the step rate the computation saw on
  earlier instances (`Pace`); an instance that, after a measured slice,
  steps it at under `straggler_ratio` of that rate hands it on, prioritized
  or not, and a round that lands on the straggler it last left (the proxy's
  round robin brings it back) moves on at once. Such a move is for the
  request's own good, so it does not age it towards priority; the server
  cannot see the client's round cap, so the moves are bounded per request by
  `straggler_budget`, carried in the state (with the SDK client's default cap
  of 10 rounds, 4 ageing hops and 3 moves leave 3 rounds for questions and
  drains).
* standing: an instance that knows it is slow (`compute.standing`: its own
  rate for the tool under `straggler_ratio` of the paces its peers gave the
  calls that arrive) hands a round on at admission, before any step: the
  same move (no ageing, retried at once, within the budget), without the
  measured slice the rule above costs each call that lands there. The
  instance that takes a round straight from a straggler serves it like a
  prioritized one (`just_fled`), or round robin would bring it back there.
  It keeps its standing while it hands rounds on, and lets one round at a
  time run as a probe when its own rate is old (`Standing.judge`). A round
  whose pace says nothing of another instance (a new call, or one measured
  here alone) is measured against the peers' paces seen here
  (`Boundary.reference`), so it does not spend a whole time slice here.
* queue: a prioritized request queued here for a slot hands back (retried
  at once) when the operator says capacity appeared elsewhere (a scale-out:
  `POST /admin/rebalance`), or after `queue_wait_ms` if set, so new
  instances with free slots take it instead of the queue of an
  oversubscribed instance. It has run nothing here, so it loses nothing;
  like a straggler move it does not age the request and it spends the same
  per-request budget of moves, so the round cap's arithmetic above holds; once the budget is spent the
  request waits for its slot as before (no starvation). The timer is off by
  default: measured on a scale-out after 10 s of overload, the queued
  requests had spent their moves bouncing between full queues before the
  new instances came (`lab/mrtr_lab/_why_shed/timeline.py`), so a blind wait
  only costs rounds; the rebalance is the signal that capacity appeared.

Task slices (`tasks.runner`) follow the same rules where they apply, through
`task_slice_end`: the checkpoint carries the pace, a slice measured well
below it ends at that boundary and goes back on the queue (a move), and a
slice taken by the straggler it fled goes back at once. A task has no round
cap and never ages, so the budget bounds moves in a row: a slice that runs
to its normal end (after the budget, at the latest) resets it, and no slice
moves when no other instance could take it (one worker).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mrtr_protocol.rounds import EndOfRound
from mrtr_worker.sealing.layout import Pace

PACE_WEIGHT = 0.5
"""Weight of the newest slice in a request's step rate: two or three instances make the reference."""
TASK_MEASURE_SHARE = 0.5
"""A task slice is measured over this share of its length (at most the MRTR window), so a move saves the rest."""


@dataclass(frozen=True)
class SheddingSettings:
    enabled: bool = True
    """Off: no admission limit for new calls (they queue for a slot), no pressure, no slice. Drain still applies."""
    max_concurrent: int = 2
    min_slice_ms: int = 200
    max_slice_ms: int = 2000
    priority_after_hops: int = 4
    retry_after_base_ms: int = 25
    retry_after_cap_ms: int = 500
    straggler_ratio: float = 0.5
    """Hand a computation on when it steps here under this fraction of the rate it saw elsewhere; 0 turns it off."""
    straggler_at_admission: bool = True
    """An instance that knows it is slow (`compute.standing`) hands rounds on before any step; off: only the
    per-slice rule moves calls off it (kept as a switch so the benchmark can show what admission adds)."""
    step_aside: bool = False
    """An instance that hands every round on (`standing`) says it is not ready, so the proxy's health check takes
    it out of rotation until a probe is due (`Standing.aside`); off: it stays in rotation and bounces them."""
    straggler_min_slice_ms: int = 1000
    """Measured time here before rates are compared, so one slow step (noise) does not bounce a call."""
    straggler_budget: int = 3
    """Moves per request (off a straggler, out of a long queue): what they can add to the client's rounds is bounded."""
    queue_wait_ms: int = 0
    """A prioritized request queued this long for a slot moves on (a move, within the budget); 0 (the default,
    see the module's docstring): it waits for its slot."""


@dataclass(frozen=True)
class Boundary:
    """What the policy knows at one step boundary."""

    slice_ms: float
    hops: int
    """Hops that age the request towards priority (`Trace.fair_hops`)."""
    waiting: int
    draining: bool
    steps: int = 0
    """Steps run in this slice, here."""
    pace: Pace | None = None
    """The rate the request saw before this round, if it carries one."""
    alone: bool = False
    """No other instance could take the work on (a task slice put back would come straight back here): no move."""
    fled: bool = False
    """The round comes straight from a straggler that handed it on (`just_fled`): served here like a prioritized one."""
    pace_here: bool = False
    """The round was last handed back by this instance: the newest (heaviest) slice in `pace` ran here, so it
    speaks of this instance more than of its peers."""
    reference: float | None = None
    """The peers' recent rate for the tool, as paces brought it here (`Standing.reference`): the yardstick when
    the round's own pace says nothing of another instance (a new call, or a pace measured here alone)."""


@dataclass(frozen=True)
class Admission:
    """A round handed back as it arrives, before it takes a slot or runs a step (`SheddingPolicy.admit`)."""

    reason: EndOfRound
    pace: Pace | None
    """The pace the round carries on."""


class SheddingPolicy:
    def __init__(self, settings: SheddingSettings) -> None:
        self.settings = settings

    def admit(self, pace: Pace | None, *, draining: bool, slow: bool, instance_id: str) -> Admission | None:
        """Whether a round that may be handed back leaves at once, before it asks for a slot (None: it asks).

        In order: a drain; a round back on the straggler it last left (`fled_here`); an instance that knows it
        is slow (`hands_on`). The engine takes this decision, and so does the fleet simulator
        (`lab/mrtr_lab/fleet_sim`), which is why it is one pure function.
        """
        if draining:
            return Admission(EndOfRound.DRAIN, pace)
        if self.fled_here(pace, instance_id):
            return Admission(EndOfRound.STRAGGLER, self.measured(pace, 0, 0.0, EndOfRound.STRAGGLER, instance_id))
        if self.hands_on(pace, slow=slow):
            return Admission(EndOfRound.STRAGGLER, self.handed_on(pace, instance_id))
        return None

    def sheds_when_full(self, hops: int, *, fled: bool) -> bool:
        """Whether a round that finds every slot taken is handed back (admission) rather than queued for one:
        not once it has aged into priority (`hops`: `Trace.fair_hops`), nor straight from a straggler (`fled`)."""
        return not (self.prioritized(hops) or fled)

    def prioritized(self, hops: int) -> bool:
        """Whether a request has aged into priority (it waits for a slot rather than being shed)."""
        return not self.settings.enabled or hops >= self.settings.priority_after_hops

    def just_fled(self, pace: Pace | None, last: str | None, here: str) -> bool:
        """Whether `last` (the instance that ended the previous round) handed this round on as a straggler, and
        this is another instance.

        Such a round is served where it lands like a prioritized one (it waits for a slot, and pressure and
        the time slice do not shed it): handed back, it would go back to the proxy's round robin, which lands
        it on the straggler one time in three, spending its moves there until it is served there at its speed.
        A round back on the straggler itself (a lone instance, or round robin) is not: `fled_here` moves it on
        while it has moves, then it is served as any other round, time slice and all.
        """
        return self.settings.enabled and pace is not None and pace.fled is not None and pace.fled == last != here

    def at_boundary(self, b: Boundary) -> EndOfRound | None:
        """The reason to yield at this boundary, or None to run the next step."""
        if b.draining:
            return EndOfRound.DRAIN
        if self.straggling(b):
            return EndOfRound.STRAGGLER
        if self.prioritized(b.hops) or b.fled:
            return None
        s = self.settings
        if b.waiting and b.slice_ms >= s.min_slice_ms:
            return EndOfRound.PRESSURE
        if s.max_slice_ms and b.slice_ms >= s.max_slice_ms:
            return EndOfRound.SLICE
        return None

    def task_slice_end(self, b: Boundary, slice_ms: float) -> EndOfRound | None:
        """Why a task slice of at most `slice_ms` ends at this boundary, or None to run the next step.

        A drain first; then a straggler move, measured over `task_measure_ms`; then pressure (a
        computation queued here for a slot: the slice goes back on the queue for any instance, after
        the same minimum slice as a call); then the slice's own end, which checkpoints even with
        shedding off. No ageing: a task has no round cap to protect, and the queue is first come.
        """
        if b.draining:
            return EndOfRound.DRAIN
        if not b.alone and self.straggling(b, self.task_measure_ms(slice_ms)):
            return EndOfRound.STRAGGLER
        s = self.settings
        if s.enabled and b.waiting and b.slice_ms >= s.min_slice_ms:
            return EndOfRound.PRESSURE
        if b.slice_ms >= slice_ms:
            return EndOfRound.SLICE
        return None

    def task_measure_ms(self, slice_ms: float) -> float:
        """How long a task slice runs here before its rate is compared: part of the slice, at most the MRTR window."""
        return min(float(self.settings.straggler_min_slice_ms), slice_ms * TASK_MEASURE_SHARE)

    def straggling(self, b: Boundary, min_slice_ms: float | None = None) -> bool:
        """Whether this instance has run the request clearly slower than its earlier instances did (or, for a
        round that brings no pace measured elsewhere, than its peers' paces say: `Boundary.reference`).

        `min_slice_ms`: the measured time before rates are compared (default: `straggler_min_slice_ms`).
        """
        measure = self.settings.straggler_min_slice_ms if min_slice_ms is None else min_slice_ms
        yardstick = self.yardstick(b)
        if yardstick is None or not self._may_move(b.pace) or b.steps == 0 or b.slice_ms < measure:
            return False
        return b.steps * 1000 / b.slice_ms < self.settings.straggler_ratio * yardstick

    @staticmethod
    def yardstick(b: Boundary) -> float | None:
        """The rate a slice is compared with: the round's own pace, or the peers' (`Boundary.reference`) when the
        pace was measured on this instance alone (`Boundary.pace_here`) or is missing."""
        own = b.pace.rate if b.pace is not None and b.pace.samples and b.pace.rate > 0 else None
        if own is None or b.pace_here:
            return b.reference if b.reference is not None else own
        return own

    def hands_on(self, pace: Pace | None, *, slow: bool) -> bool:
        """Whether a round is handed on at admission because this instance knows it is `slow`: the straggler
        rule is on and the request has moves left (one with none is served here, so the round cap holds)."""
        s = self.settings
        moves = pace.moves if pace is not None else 0
        return slow and s.enabled and s.straggler_at_admission and s.straggler_ratio > 0 and moves < s.straggler_budget

    def steps_aside(self, *, aside: bool) -> bool:
        """Whether an instance whose standing is `aside` (`Standing.aside`) leaves the proxy's rotation: only
        where it would hand the rounds on at admission anyway."""
        s = self.settings
        return aside and s.step_aside and s.enabled and s.straggler_at_admission and s.straggler_ratio > 0

    @staticmethod
    def handed_on(pace: Pace | None, instance_id: str) -> Pace:
        """The pace a round carries on after `hands_on`: one move more, rate untouched (nothing ran here), and
        this instance marked as fled (`fled_here`), so a round back here moves on even after it forgets."""
        if pace is None:
            return Pace(rate=0.0, samples=0, moves=1, fled=instance_id)
        return replace(pace, moves=pace.moves + 1, fled=instance_id)

    def may_leave_queue(self, pace: Pace | None) -> bool:
        """Whether a request queued here for a slot may move on (a rebalance, a long wait): it has moves left
        (the round cap), and shedding is on (staying where you land waits)."""
        s = self.settings
        return s.enabled and (pace.moves if pace is not None else 0) < s.straggler_budget

    def queue_wait_s(self, pace: Pace | None) -> float | None:
        """How long a prioritized request may queue here for a slot before it moves on; None: until it gets one."""
        if self.settings.queue_wait_ms <= 0 or not self.may_leave_queue(pace):
            return None
        return self.settings.queue_wait_ms / 1000

    @staticmethod
    def left_queue(pace: Pace | None) -> Pace:
        """The pace a request carries on after leaving a queue: one move more (it does not age), rate untouched."""
        if pace is None:
            return Pace(rate=0.0, samples=0, moves=1)
        return replace(pace, moves=pace.moves + 1)

    def fled_here(self, pace: Pace | None, instance_id: str, *, alone: bool = False) -> bool:
        """Whether a round arrives at the straggler it last left (round robin brings it back): move on unmeasured.

        `alone`: no other instance could take it (a task on a one-worker fleet): it stays.
        """
        return not alone and self._may_move(pace) and pace is not None and pace.fled == instance_id

    def _may_move(self, pace: Pace | None) -> bool:
        """The straggler rule is on and the request has moves left (the round cap)."""
        s = self.settings
        if not s.enabled or s.straggler_ratio <= 0:
            return False
        return (pace.moves if pace is not None else 0) < s.straggler_budget

    @staticmethod
    def measured(
        pace: Pace | None, steps: int, slice_ms: float, reason: EndOfRound | None, instance_id: str | None = None
    ) -> Pace | None:
        """The pace to carry on after a round that ran `steps` on `instance_id` in `slice_ms` and ended for `reason`."""
        if reason is EndOfRound.STRAGGLER:
            # The straggler's own rate stays out of the reference, or a return to it would pass unnoticed.
            if pace is None:
                return Pace(rate=0.0, samples=0, moves=1, fled=instance_id)
            return Pace(rate=pace.rate, samples=pace.samples, moves=pace.moves + 1, fled=instance_id)
        if steps == 0 or slice_ms <= 0:
            return pace  # nothing measured
        rate = steps * 1000 / slice_ms
        if pace is None or not pace.samples:
            return Pace(rate=rate, samples=1, moves=pace.moves if pace is not None else 0)
        weighted = PACE_WEIGHT * rate + (1 - PACE_WEIGHT) * pace.rate
        return Pace(rate=weighted, samples=pace.samples + 1, moves=pace.moves, fled=pace.fled)

    @classmethod
    def measured_slice(
        cls, pace: Pace | None, steps: int, slice_ms: float, reason: EndOfRound | None, instance_id: str
    ) -> Pace | None:
        """The pace a task's checkpoint carries after a slice: as `measured`, but a slice that ran steps and was
        not a move resets the moves (the budget bounds moves in a row: a task has no round cap), and one measured on the
        instance it fled clears that mark (its rate is in the reference now)."""
        after = cls.measured(pace, steps, slice_ms, reason, instance_id)
        if after is None or reason is EndOfRound.STRAGGLER or steps == 0:
            return after  # a move, or nothing ran: nothing to reset
        return replace(after, moves=0, fled=None if after.fled == instance_id else after.fled)

    def retry_after_ms(self, reason: EndOfRound, hops: int) -> int:
        """The `_meta` retry hint: at once after a yield, growing backoff when admission is refused."""
        if reason is not EndOfRound.ADMISSION:
            return 0
        s = self.settings
        return int(min(s.retry_after_cap_ms, s.retry_after_base_ms * 2**hops))
