"""What the balance benchmark compares: a proxy balance, and for round robin, also with slow workers stepping aside.

Why a setup and not only a balance: issue 25 §4 found that under hand-back the
round robin gives the instance after a slow one in the pool that one's share
too (the slow one hands each round on at once, and the retry reaches the proxy
before any other request moves its cursor). One fix is another balance; the
other keeps round robin and has the slow worker leave the rotation while it
would hand every round on (`MRTR_WORKER_STEP_ASIDE`, `Standing.aside`). Both
are measured side by side in one run, and the fleet simulator replays each
cell with the same setup, so a key names both halves: `round_robin+step_aside`.
Least request steps aside too: among a few workers it sends a round straight back to the slow one (it has
the fewest requests open, having handed its own on), which out of rotation it cannot.
"""

from __future__ import annotations

from typing import NamedTuple

from mrtr_lb.balancing import Balance
from mrtr_worker.compute.policy import SheddingSettings

STEP_ASIDE = "step_aside"
"""The suffix of a setup whose workers step aside while slow."""


class Setup(NamedTuple):
    balance: str
    """`MRTR_LB_BALANCE`."""
    step_aside: bool
    """`MRTR_WORKER_STEP_ASIDE`."""

    @property
    def lb_env(self) -> dict[str, str]:
        return {"MRTR_LB_BALANCE": self.balance}

    @property
    def worker_env(self) -> dict[str, str]:
        return SheddingSettings(step_aside=self.step_aside).environment()


def setup_of(key: str) -> Setup:
    """`round_robin` or `round_robin+step_aside` (any of mrtr_lb's balances, with or without the suffix)."""
    balance, plus, extra = key.partition("+")
    if (plus and extra != STEP_ASIDE) or balance not in set(Balance):
        known = ", ".join(Balance)
        raise ValueError(f"unknown setup {key!r}: a balance ({known}), optionally followed by +{STEP_ASIDE}")
    return Setup(balance, bool(plus))


SETUPS = ("round_robin", "two_choices", "least_request", f"round_robin+{STEP_ASIDE}", f"least_request+{STEP_ASIDE}")
"""What `scripts/bench balance` runs by default."""
