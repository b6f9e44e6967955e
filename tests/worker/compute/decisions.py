"""Asking the shedding policy its questions in tests: a round as it arrives, and at a step's end."""

from __future__ import annotations

from mrtr_protocol.rounds import EndOfRound
from mrtr_worker.compute.policy import Arrival, Boundary, Decision, SheddingPolicy
from mrtr_worker.sealing.layout import Pace


def arrive(
    policy: SheddingPolicy,
    pace: Pace | None = None,
    *,
    hops: int = 0,
    here: str = "w1",
    last: str | None = None,
    draining: bool = False,
    slow: bool = False,
    full: bool = False,
    fleet_full: bool = False,
    fresh: bool = False,
    expected_wait_ms: float = 0.0,
) -> Decision:
    """What the policy decides for a round arriving at `here` (by default: an idle instance, a first round)."""
    return policy.arrives(
        Arrival(
            pace=pace,
            hops=hops,
            instance_id=here,
            last=last,
            draining=draining,
            slow=slow,
            full=full,
            fleet_full=fleet_full,
            fresh=fresh,
            expected_wait_ms=expected_wait_ms,
        )
    )


def reason_at(policy: SheddingPolicy, at: Boundary) -> EndOfRound | None:
    """Why the round ends at this step boundary (None: the next step runs)."""
    end = policy.at_step_end(at)
    return None if end is None else end.reason
