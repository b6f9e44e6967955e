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
  not shed again (except by a drain): it waits for a slot here instead, so
  no request starves and clients with a round cap still finish.
"""

from __future__ import annotations

from dataclasses import dataclass

from mrtr_protocol.rounds import EndOfRound


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


@dataclass(frozen=True)
class Boundary:
    """What the policy knows at one step boundary."""

    slice_ms: float
    hops: int
    waiting: int
    draining: bool


class SheddingPolicy:
    def __init__(self, settings: SheddingSettings) -> None:
        self.settings = settings

    def prioritized(self, hops: int) -> bool:
        """Whether a request has aged into priority (it waits for a slot rather than being shed)."""
        return not self.settings.enabled or hops >= self.settings.priority_after_hops

    def at_boundary(self, b: Boundary) -> EndOfRound | None:
        """The reason to yield at this boundary, or None to run the next step."""
        if b.draining:
            return EndOfRound.DRAIN
        if self.prioritized(b.hops):
            return None
        s = self.settings
        if b.waiting and b.slice_ms >= s.min_slice_ms:
            return EndOfRound.PRESSURE
        if s.max_slice_ms and b.slice_ms >= s.max_slice_ms:
            return EndOfRound.SLICE
        return None

    def retry_after_ms(self, reason: EndOfRound, hops: int) -> int:
        """The `_meta` retry hint: at once after a yield, growing backoff when admission is refused."""
        if reason is not EndOfRound.ADMISSION:
            return 0
        s = self.settings
        return int(min(s.retry_after_cap_ms, s.retry_after_base_ms * 2**hops))
