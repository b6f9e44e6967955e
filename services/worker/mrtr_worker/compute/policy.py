"""The shedding policy: when a round is handed back to its client instead of running on.

Decisions fall only at step boundaries, so a hand-back never loses more than the step in progress. The
engine asks one question at each moment a round can end: `SheddingPolicy.arrives` (run, hand back, or
wait for a slot) and `SheddingPolicy.at_step_end` (hand back or go on); task slices ask
`task_slice_end`. The rules behind the answers (admission, pressure, time slice, drain, fairness,
straggler, standing, queue) and the words for them are in `docs/policy.md`, one table row each.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from pydantic import Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from mrtr_protocol.rounds import EndOfRound
from mrtr_worker.sealing.layout import Pace

PACE_WEIGHT = 0.5
"""Weight of the newest slice in a request's step rate: two or three instances make the reference."""
TASK_MEASURE_SHARE = 0.5
"""A task slice is measured over this share of its length (at most the MRTR window), so a move saves the rest."""


@pydantic_dataclass(frozen=True)
class SheddingSettings:
    """The shedding policy's settings: the one place each is defined, with its default and its bounds.

    The worker reads them from the environment (`WorkerSettings.shedding`, `MRTR_WORKER_<NAME>`; `enabled` is
    `MRTR_WORKER_SHEDDING` and `max_concurrent` `MRTR_WORKER_MAX_CONCURRENT_COMPUTATIONS`); benchmarks and the
    lab build theirs here and pass them on with `environment()`.
    """

    enabled: bool = True
    """Off: no admission limit for new calls (they queue for a slot), no pressure, no slice. Drain still applies."""
    max_concurrent: int = Field(default=2, ge=1, le=64)
    """Computations stepping at once (the compute slots); a call beyond them is refused or queued."""
    min_slice_ms: int = Field(default=200, ge=0)
    """Under pressure a computation runs at least this long before it is handed back."""
    max_slice_ms: int = Field(default=2000, ge=0)
    """A computation yields after this long even on an idle worker; 0 turns the time slice off."""
    priority_after_hops: int = Field(default=4, ge=1)
    """Hand-backs after which a request is prioritized: admitted, never shed again for pressure or slice."""
    retry_after_base_ms: int = Field(default=25, ge=0)
    retry_after_cap_ms: int = Field(default=500, ge=0)
    """The retry hint of an admission refusal: the base, doubled per hop, up to the cap."""
    straggler_ratio: float = Field(default=0.5, ge=0, lt=1)
    """Hand a computation on when it steps here under this fraction of the rate it saw elsewhere; 0 turns it off."""
    straggler_at_admission: bool = True
    """An instance that knows it is slow (`compute.standing`) hands rounds on before any step; off: only the
    per-slice rule moves calls off it (kept as a switch so the benchmark can show what admission adds)."""
    step_aside: bool = False
    """An instance that hands every round on (`standing`) answers 429 on `/readyz`, so the proxy's health check takes
    it out of rotation until a probe is due (`Standing.aside`); off: it stays in rotation and bounces them."""
    straggler_min_slice_ms: int = Field(default=1000, ge=0)
    """Measured time here before rates are compared, so one slow step (noise) does not bounce a call."""
    straggler_budget: int = Field(default=3, ge=0)
    """Moves per request (off a straggler, out of a long queue): what they can add to the client's rounds is bounded."""
    fleet_full_hold_ms: int = Field(default=0, ge=0)
    """After a round another instance refused at admission arrives here, for this long the fleet counts as full: a
    full instance queues new rounds instead of refusing them, and runs its computations on (`compute.fleet_load`);
    0 (the default until the spike benchmark has settled it: docs/policy.md) turns it off."""
    refuse_new_after_ms: int = Field(default=0, ge=0)
    """While the fleet looks full, a new call (no step run for it yet) that would queue here longer than this is
    refused as busy (`mrtr_protocol.busy`: -32000 with a retry hint) rather than queued past what its caller
    waits; 0 (off, with the fleet-full rule): it queues."""
    queue_wait_ms: int = Field(default=0, ge=0)
    """A prioritized request queued this long for a slot moves on (a move, within the budget); 0 (the default,
    see the module's docstring): it waits for its slot."""

    def environment(self) -> dict[str, str]:
        """These settings as the worker's environment variables (only those that differ from the defaults)."""
        default = SheddingSettings()
        return {
            environment_name(name): _env_text(getattr(self, name))
            for name in SHEDDING_FIELDS
            if getattr(self, name) != getattr(default, name)
        }


SHEDDING_FIELDS: tuple[str, ...] = tuple(field.name for field in fields(SheddingSettings))
_ENV_NAMES = {"enabled": "MRTR_WORKER_SHEDDING", "max_concurrent": "MRTR_WORKER_MAX_CONCURRENT_COMPUTATIONS"}


def environment_name(field: str) -> str:
    """The environment variable a worker reads a shedding setting from."""
    return _ENV_NAMES.get(field, f"MRTR_WORKER_{field.upper()}")


def _env_text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


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
    """The round comes straight from a straggler that handed it on (`Run.fled`): served here like a prioritized one."""
    pace_here: bool = False
    """The round was last handed back by this instance: the newest (heaviest) slice in `pace` ran here, so it
    speaks of this instance more than of its peers."""
    reference: float | None = None
    """The peers' recent rate for the tool, as paces brought it here (`Standing.reference`): the yardstick when
    the round's own pace says nothing of another instance (a new call, or a pace measured here alone)."""
    instance_id: str | None = None
    """This instance: a round handed on as a straggler carries it as the instance it fled."""
    fleet_full: bool = False
    """The fleet looks full from here (`compute.fleet_load`): neither pressure nor the time slice ends the round."""


@dataclass(frozen=True)
class Arrival:
    """What the policy knows of a round as it arrives, before it takes a slot or runs a step."""

    pace: Pace | None
    """The pace the round brings (`Trace.pace`)."""
    hops: int
    """Hops that age the request towards priority (`Trace.fair_hops`)."""
    instance_id: str
    last: str | None
    """The instance that ended the round's previous round (None: a first round)."""
    draining: bool
    slow: bool
    """This instance's standing says it is slow at the tool (`Judgement.SLOW`)."""
    full: bool
    """Every compute slot here is taken."""
    can_hand_back: bool = True
    """False for a round that cannot end early (a 2025-era wire): it waits for a slot and runs to its end."""
    fleet_full: bool = False
    """The fleet looks full from here (`compute.fleet_load`): a refusal would only circle, so the round queues."""
    fresh: bool = False
    """No step has run for the call yet (new, or only refused at admission so far): a refusal loses nothing."""
    expected_wait_ms: float = 0.0
    """How long a round arriving now would queue for a slot here (`compute.queue_estimate`)."""


@dataclass(frozen=True)
class Run:
    """Serve the round here: take a slot and step."""

    fled: bool = False
    """It comes straight from a straggler that handed it on: served like a prioritized round (`Boundary.fled`)."""


@dataclass(frozen=True)
class HandBack:
    """End the round: its state goes back to the client, which retries after `retry_after_ms` (0: at once)."""

    reason: EndOfRound
    pace: Pace | None
    """The pace the round carries on."""
    retry_after_ms: int = 0


@dataclass(frozen=True)
class Wait:
    """Queue here for a slot, then run (as `Run` with the same `fled`)."""

    fled: bool
    leave: HandBack | None
    """How it moves on when capacity appears elsewhere (a rebalance) or `patience_s` runs out; None: it stays."""
    patience_s: float | None = None
    """Seconds it queues before it moves on (None: until its slot, or a rebalance)."""


@dataclass(frozen=True)
class Busy:
    """Refuse the new call at once, before it runs anything (`mrtr_protocol.busy`): the fleet is full and the
    queue here is longer than its caller waits; it may come back after `retry_after_ms`."""

    retry_after_ms: int
    expected_wait_ms: float


Decision = Run | HandBack | Wait | Busy
"""What happens to a round as it arrives (`SheddingPolicy.arrives`)."""


class SheddingPolicy:
    """The decisions of the shedding policy: one question at each moment a round can end early.

    `arrives` (a round comes in), `at_step_end` (a step has ended) and, for task slices, `task_slice_end`;
    the engine and the fleet simulator ask them and do what the answer says. The rest are private rules.
    """

    def __init__(self, settings: SheddingSettings) -> None:
        self.settings = settings

    def arrives(self, a: Arrival) -> Decision:
        """Hand the round back at once, run it, or queue it for a slot (and say how it may leave the queue).

        In order: a drain; a round back on the straggler it last left (`fled_here`); an instance that knows it
        is slow; then, with every slot taken, a hand-back at admission unless the request is prioritized (aged,
        or straight from a straggler) or the fleet looks full; a new call refused as busy when the fleet looks
        full and the queue is too long (`refuse_new_after_ms`); else a wait that a rebalance or `queue_wait_ms`
        may end with a move.
        """
        fled = self._just_fled(a.pace, a.last, a.instance_id)
        if a.can_hand_back:
            early = self._early(a.pace, draining=a.draining, slow=a.slow, instance_id=a.instance_id)
            if early is not None:
                return early
        if not a.full:
            return Run(fled)
        if a.can_hand_back and not (self._prioritized(a.hops) or fled or a.fleet_full):
            return HandBack(EndOfRound.ADMISSION, a.pace, self._retry_after_ms(EndOfRound.ADMISSION, a.hops))
        busy = self._busy(a)
        if busy is not None:
            return busy
        if not (a.can_hand_back and self._may_leave_queue(a.pace)):
            return Wait(fled, None)
        leave = HandBack(EndOfRound.PRESSURE, _one_more_move(a.pace))
        return Wait(fled, leave, self._queue_wait_s())

    def _busy(self, a: Arrival) -> Busy | None:
        """A new call refused while the fleet looks full, when it would queue here past `refuse_new_after_ms`; it
        is told to come back once the queue would be within the limit (at least the admission hint's base)."""
        limit = self.settings.refuse_new_after_ms
        if not (limit and a.fleet_full and a.fresh) or a.expected_wait_ms <= limit:
            return None
        retry_after = max(self.settings.retry_after_base_ms, round(a.expected_wait_ms - limit))
        return Busy(retry_after, a.expected_wait_ms)

    def at_step_end(self, b: Boundary) -> HandBack | None:
        """Hand the round back at this step boundary (with the pace it carries on), or None: run the next step."""
        reason = self._at_boundary(b)
        if reason is None:
            return None
        pace = self.measured(b.pace, b.steps, b.slice_ms, reason, b.instance_id)
        return HandBack(reason, pace, self._retry_after_ms(reason, b.hops))

    def steps_aside(self, *, aside: bool) -> bool:
        """Whether an instance whose standing is `aside` (`Standing.aside`) leaves the proxy's rotation: only
        where it would hand the rounds on at admission anyway."""
        s = self.settings
        return aside and s.step_aside and s.enabled and s.straggler_at_admission and s.straggler_ratio > 0

    def _early(self, pace: Pace | None, *, draining: bool, slow: bool, instance_id: str) -> HandBack | None:
        """A hand-back before the round asks for a slot: a drain, a return to the straggler it fled, a slow
        instance (with the pace it carries on); None: it asks for a slot."""
        if draining:
            return HandBack(EndOfRound.DRAIN, pace)
        if self.fled_here(pace, instance_id):
            return HandBack(EndOfRound.STRAGGLER, self.measured(pace, 0, 0.0, EndOfRound.STRAGGLER, instance_id))
        if self._hands_on(pace, slow=slow):
            return HandBack(EndOfRound.STRAGGLER, _handed_on(pace, instance_id))
        return None

    def _prioritized(self, hops: int) -> bool:
        """Whether a request has aged into priority (it waits for a slot rather than being shed)."""
        return not self.settings.enabled or hops >= self.settings.priority_after_hops

    def _just_fled(self, pace: Pace | None, last: str | None, here: str) -> bool:
        """Whether `last` (the instance that ended the previous round) handed this round on as a straggler, and
        this is another instance.

        Such a round is served where it lands like a prioritized one (it waits for a slot, and pressure and
        the time slice do not shed it): handed back, it would go back to the proxy's round robin, which lands
        it on the straggler one time in three, spending its moves there until it is served there at its speed.
        A round back on the straggler itself (a lone instance, or round robin) is not: `fled_here` moves it on
        while it has moves, then it is served as any other round, time slice and all.
        """
        return self.settings.enabled and pace is not None and pace.fled is not None and pace.fled == last != here

    def _at_boundary(self, b: Boundary) -> EndOfRound | None:
        """The reason to yield at this boundary, or None to run the next step."""
        if b.draining:
            return EndOfRound.DRAIN
        if self._straggling(b):
            return EndOfRound.STRAGGLER
        if self._prioritized(b.hops) or b.fled:
            return None
        s = self.settings
        if b.fleet_full:
            return None  # a yield would wait at the back of another full queue: run on, as with shedding off
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
        if not b.alone and self._straggling(b, self.task_measure_ms(slice_ms)):
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

    def _straggling(self, b: Boundary, min_slice_ms: float | None = None) -> bool:
        """Whether this instance has run the request clearly slower than its earlier instances did (or, for a
        round that brings no pace measured elsewhere, than its peers' paces say: `Boundary.reference`).

        `min_slice_ms`: the measured time before rates are compared (default: `straggler_min_slice_ms`).
        """
        measure = self.settings.straggler_min_slice_ms if min_slice_ms is None else min_slice_ms
        yardstick = _yardstick(b)
        if yardstick is None or not self._may_move(b.pace) or b.steps == 0 or b.slice_ms < measure:
            return False
        return b.steps * 1000 / b.slice_ms < self.settings.straggler_ratio * yardstick

    def _hands_on(self, pace: Pace | None, *, slow: bool) -> bool:
        """Whether a round is handed on at admission because this instance knows it is `slow`: the straggler
        rule is on and the request has moves left (one with none is served here, so the round cap holds)."""
        s = self.settings
        moves = pace.moves if pace is not None else 0
        return slow and s.enabled and s.straggler_at_admission and s.straggler_ratio > 0 and moves < s.straggler_budget

    def _may_leave_queue(self, pace: Pace | None) -> bool:
        """Whether a request queued here for a slot may move on (a rebalance, a long wait): it has moves left
        (the round cap), and shedding is on (staying where you land waits)."""
        s = self.settings
        return s.enabled and (pace.moves if pace is not None else 0) < s.straggler_budget

    def _queue_wait_s(self) -> float | None:
        """How long a prioritized request that may move queues here for a slot before it does; None: until it
        gets one (or a rebalance)."""
        return self.settings.queue_wait_ms / 1000 if self.settings.queue_wait_ms > 0 else None

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

    def _retry_after_ms(self, reason: EndOfRound, hops: int) -> int:
        """The `_meta` retry hint: at once after a yield, growing backoff when admission is refused."""
        if reason is not EndOfRound.ADMISSION:
            return 0
        s = self.settings
        return int(min(s.retry_after_cap_ms, s.retry_after_base_ms * 2**hops))


def _yardstick(b: Boundary) -> float | None:
    """The rate a slice is compared with: the round's own pace, or the peers' (`Boundary.reference`) when the
    pace was measured on this instance alone (`Boundary.pace_here`) or is missing."""
    own = b.pace.rate if b.pace is not None and b.pace.samples and b.pace.rate > 0 else None
    if own is None or b.pace_here:
        return b.reference if b.reference is not None else own
    return own


def _handed_on(pace: Pace | None, instance_id: str) -> Pace:
    """The pace a round carries on after a slow instance hands it on: one move more, rate untouched (nothing ran
    here), and this instance marked as fled (`fled_here`), so a round back here moves on even after it forgets."""
    if pace is None:
        return Pace(rate=0.0, samples=0, moves=1, fled=instance_id)
    return replace(pace, moves=pace.moves + 1, fled=instance_id)


def _one_more_move(pace: Pace | None) -> Pace:
    """The pace a request carries on after leaving a queue: one move more (it does not age), rate untouched."""
    if pace is None:
        return Pace(rate=0.0, samples=0, moves=1)
    return replace(pace, moves=pace.moves + 1)
