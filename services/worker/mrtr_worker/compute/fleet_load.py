"""Whether the whole fleet looks full from here, from the rounds that arrive: no shared store, no proxy help.

An instance sees only itself. A round that another instance refused at admission moments ago (its
state says so) and that finds every slot here taken too is evidence that the fleet is full: handing
it back again would only send it to a third full instance, and every circle is one more request
that eats the capacity it was meant to find. For `hold_ms` after such a round, a full instance
queues new rounds instead of refusing them (`Arrival.fleet_full`), and neither pressure nor the time
slice ends a computation (`Boundary.fleet_full`): a yield would wait at the back of another full
queue. While rounds queue here because of it, the evidence stays fresh:
the instances that stopped refusing send none, and the queue is the sign that nothing has changed.
Once the queue is gone and the evidence older than the hold, the next refusal probes the fleet again
and the instance it lands on learns in turn (docs/policy.md, "A fleet-wide overload").
"""

from __future__ import annotations

import math


class FleetLoad:
    """When a round refused elsewhere last arrived here, and whether that is recent enough to call the fleet full."""

    def __init__(self, hold_ms: int) -> None:
        self._hold_s = hold_ms / 1000
        self._last = -math.inf
        self._engaged = False
        """The fleet looked full, and no moment since found both the evidence old and no round queued here."""

    def note(self, *, refused_elsewhere: bool, now: float) -> None:
        """A round arrived; `refused_elsewhere`: another instance refused it at admission in its last round."""
        if refused_elsewhere:
            self._last = now

    def full(self, now: float, queued: int) -> bool:
        """Whether the fleet looks full: a round refused elsewhere arrived within the hold (0 turns it off),
        or it looked full and rounds have queued here ever since (`queued`: rounds waiting for a slot now)."""
        if self._hold_s <= 0:
            return False
        if now - self._last <= self._hold_s:
            self._engaged = True
        elif queued == 0:
            self._engaged = False
        return self._engaged
