"""How long a round arriving now would queue for a compute slot here, from how long rounds lately held one.

The n-th round queued gets a slot after about n + 1 releases, and the slots release at `capacity` per
mean hold: so (queued + 1) x mean hold / capacity. The hold is the time a round kept its slot, from
taking it to ending (complete, handed back or asking), smoothed so one long round does not swing it.
Nothing is known before the first round ends here: the estimate is 0 until then.
"""

from __future__ import annotations

HOLD_WEIGHT = 0.2
"""Weight of the newest hold in the mean: about the last five rounds make it."""


class QueueEstimate:
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._mean_hold_s: float | None = None

    def held(self, seconds: float) -> None:
        """A round kept its slot this long."""
        if self._mean_hold_s is None:
            self._mean_hold_s = seconds
        else:
            self._mean_hold_s += HOLD_WEIGHT * (seconds - self._mean_hold_s)

    def wait_ms(self, queued: int) -> float:
        """The expected wait of a round that would queue behind `queued` others."""
        if self._mean_hold_s is None:
            return 0.0
        return (queued + 1) * self._mean_hold_s / self._capacity * 1000
