"""Which eligible backend takes the next request: round robin (the default), two choices, or least request.

Round robin needs no knowledge of the backends and suits a fleet of equal
instances where MRTR hand-back does the balancing: a busy or slow worker
hands the round back and the retry goes to the next one. The other two look
at the requests the proxy has open on each backend (`Backend.in_flight`):

* `two_choices`: two backends drawn at random, the one with fewer requests
  open (the power of two choices; Envoy's least-request balancer by
  default). O(1) per pick at any fleet size.
* `least_request`: the backend with the fewest requests open, ties broken
  in round-robin order. O(n) per pick.

Set with `MRTR_LB_BALANCE`; the fleet simulator (`lab/mrtr_lab/fleet_sim`)
drives these same classes, and its study says when each pays
(`docs/lab/studies.md`, "Past two cores").
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from enum import StrEnum
from typing import Protocol

from mrtr_lb.backends import Backend

TRIES = 4
"""Random draws for each of the two choices before falling back to a scan of the eligible backends."""


class Balance(StrEnum):
    ROUND_ROBIN = "round_robin"
    TWO_CHOICES = "two_choices"
    LEAST_REQUEST = "least_request"


class Picker(Protocol):
    """Chooses among `backends` (in pool order), never one that is not eligible or is in `excluded`."""

    def __call__(self, backends: Sequence[Backend], excluded: Collection[Backend]) -> Backend | None: ...


def _usable(backend: Backend, excluded: Collection[Backend]) -> bool:
    return backend.healthy and not backend.drained and backend not in excluded


class TwoChoices:
    """The less loaded of two distinct backends drawn at random (ties: the first drawn)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def __call__(self, backends: Sequence[Backend], excluded: Collection[Backend]) -> Backend | None:
        first = self._draw(backends, excluded, None)
        if first is None:
            return None
        second = self._draw(backends, excluded, first)
        if second is None or first.in_flight <= second.in_flight:
            return first
        return second

    def _draw(
        self, backends: Sequence[Backend], excluded: Collection[Backend], other: Backend | None
    ) -> Backend | None:
        count = len(backends)
        for _ in range(TRIES if count else 0):
            backend = backends[self._rng.randrange(count)]
            if backend is not other and _usable(backend, excluded):
                return backend
        usable = [b for b in backends if b is not other and _usable(b, excluded)]  # most are out: look at all
        return self._rng.choice(usable) if usable else None


class LeastRequest:
    """The backend with the fewest requests open; among equals, the next in round-robin order."""

    def __init__(self) -> None:
        self._cursor = 0

    def __call__(self, backends: Sequence[Backend], excluded: Collection[Backend]) -> Backend | None:
        count = len(backends)
        best: Backend | None = None
        best_index = 0
        for step in range(count):
            index = (self._cursor + step) % count
            backend = backends[index]
            if _usable(backend, excluded) and (best is None or backend.in_flight < best.in_flight):
                best, best_index = backend, index
                if backend.in_flight == 0:
                    break  # nothing beats an idle backend
        if best is not None:
            self._cursor = (best_index + 1) % count
        return best


def picker(balance: Balance, rng: random.Random | None = None) -> Picker | None:
    """The picker for `balance`; None for round robin, which is the pool's own cursor (`BackendPool.pick`)."""
    if balance is Balance.TWO_CHOICES:
        return TwoChoices(rng)
    if balance is Balance.LEAST_REQUEST:
        return LeastRequest()
    return None
