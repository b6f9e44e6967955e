"""The ways of running a fleet the study compares: the worker's shedding, the proxy's balance, the client's hedging.

Hand-back strategies run the real default `SheddingSettings` and leave by
the operator's drain; the others run with shedding off (the worker's
`MRTR_WORKER_SHEDDING=false`: calls queue for a slot and stay where they
landed) and leave as a graceful shutdown does: out of rotation, the calls
finish, up to a grace period (Kubernetes' default of 30 s), then a kill.

The task strategies run the work as task slices (`tasks.py`) on the real
defaults, with the straggler rule on or off (`MRTR_WORKER_STRAGGLER_RATIO=0`):
the task scenarios run only those, the others only the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mrtr_lb.balancing import Balance
from mrtr_worker.compute.policy import SheddingSettings

GRACE_SECONDS = 30.0
"""How long a leaving instance that does not hand back may wait for its calls (`terminationGracePeriodSeconds`)."""


@dataclass(frozen=True)
class Strategy:
    key: str
    label: str
    shedding: bool
    balance: Balance
    hedge: bool = False
    tasks: bool = False
    """The work runs as task slices pulled from Redis (the task scenarios), not as MRTR calls."""
    straggler: bool = True
    step_aside: bool = False
    """A slow instance leaves the proxy's rotation while it would hand every round on (`MRTR_WORKER_STEP_ASIDE`)."""

    @property
    def settings(self) -> SheddingSettings:
        settings = SheddingSettings() if self.shedding else SheddingSettings(enabled=False)
        settings = replace(settings, step_aside=self.step_aside)
        return settings if self.straggler else replace(settings, straggler_ratio=0)


STRATEGIES = {
    s.key: s
    for s in (
        Strategy("hand-back", "hand-back, round robin (ours)", True, Balance.ROUND_ROBIN),
        Strategy("stay", "stay where you land, round robin", False, Balance.ROUND_ROBIN),
        Strategy("two-choices", "two choices, no hand-back", False, Balance.TWO_CHOICES),
        Strategy("hedged", "hedged at p95, round robin, no hand-back", False, Balance.ROUND_ROBIN, hedge=True),
        Strategy("hand-back+two-choices", "hand-back, two choices", True, Balance.TWO_CHOICES),
        Strategy("hand-back+least-request", "hand-back, least request", True, Balance.LEAST_REQUEST),
        Strategy(
            "hand-back+step-aside",
            "hand-back, round robin, slow steps aside",
            True,
            Balance.ROUND_ROBIN,
            step_aside=True,
        ),
        Strategy(
            "hand-back+least-request+step-aside",
            "hand-back, least request, slow steps aside",
            True,
            Balance.LEAST_REQUEST,
            step_aside=True,
        ),
        Strategy("tasks-rule-on", "task slices, straggler rule on", True, Balance.ROUND_ROBIN, tasks=True),
        Strategy(
            "tasks-rule-off", "task slices, straggler rule off", True, Balance.ROUND_ROBIN, tasks=True, straggler=False
        ),
    )
}
