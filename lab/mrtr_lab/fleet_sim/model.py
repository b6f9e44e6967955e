"""The model's parameters, each one measured on the real cluster (`calibrate.py`) or taken from the code itself.

Nothing here is fitted to the figures the model is compared with: step
times, hop CPU and start-up come from `calibration.json`; the shedding
settings, the client's retry policy and the proxy's health checks are the
real defaults, imported.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from mrtr_lab._why_shed.fleet import IDLE_POLL
from mrtr_lab.fleet_sim.calibrate import Calibration
from mrtr_lab.fleet_sim.task_cost import TaskCost

QUIET_SHARE = 0.05
"""Other processes' share of the CPU up to which a measurement counts as a quiet machine's (the reference cells
ran at 1-3 %)."""
THROTTLE_PERIOD = 0.1
"""The quarter-speed instance's SIGSTOP/SIGCONT cycle (`benchmarks._throttle.THROTTLE_PERIOD`)."""
STARTUP_WAIT = 0.25
"""A started worker's wait for the proxy's first probe (half the 0.5 s health interval, on average)."""


@dataclass(frozen=True)
class Model:
    step_mean: float
    """CPU seconds of one step of the short call, alone on a core."""
    step_cv: float
    long_step_mean: float
    long_step_cv: float
    crowded_step_mean: float
    """A step's CPU seconds with six stepping at once (the real cluster, every slot busy)."""
    crowded_long_step_mean: float
    client_first: float
    client_hop: float
    proxy_first: float
    proxy_hop: float
    worker_first: float
    worker_hop: float
    worker_step: float
    """The worker's main process per step (dispatch to the step process and back): added to each step's work."""
    start_cpu: float
    """CPU seconds of a worker's start-up (the process and its step pool)."""
    tasks: TaskCost | None = None
    """What the task half costs around its steps (`task_cost.py`); None: no task cell can run."""
    leave_lag: float = 0.0
    """Seconds from a leaving worker's last call's end to its removal from the proxy's pool: the benchmark's next
    look (half of `IDLE_POLL` on average), the process's exit and the proxy's next read of its backends file
    (`StartUp.gone`)."""
    share_spread: float = 0.0
    """The spread of a step pool's draws of luck on the one shared machine (`uneven_share.py`); 0: even shares."""
    share_period: float = 0.0
    """Seconds each draw lasts."""
    poll_lift: float = 0.0
    """How much more of the cores a step pool claims while the benchmark reads its worker's page every 50 ms
    (`polled_lift.py`); 0: none."""

    @classmethod
    def from_calibration(cls, cal: Calibration) -> Model:
        """The measured parameters. The step times are those `calibrate.py` timed, as they are when the machine was
        quiet then (`measured_quiet`). Else, with a quiet step (`quiet.py`: the reference figures come from a quiet
        machine) the step times are the quiet ones: the short call's for its steps two and six at once, the long
        call's for its own; measured under load at different moments, the crowded and uncrowded times differed by
        the load of each moment more than by crowding, so the quiet ones serve for both."""
        hop = cal.hop
        quiet = cal.step_quiet if not measured_quiet(cal) else None
        short = quiet.mean if quiet is not None else None
        long = quiet.long_mean if quiet is not None and quiet.long_mean > 0 else None
        return cls(
            step_mean=short or cal.step_short.mean,
            step_cv=cal.step_short.cv,
            long_step_mean=long or cal.step_long.mean,
            long_step_cv=cal.step_long.cv,
            crowded_step_mean=short or cal.step_crowded.mean,
            crowded_long_step_mean=long or cal.step_long_crowded.mean,
            client_first=max(hop.first_client, hop.client),
            client_hop=max(0.0, hop.client),
            proxy_first=max(hop.first_proxy, hop.proxy),
            proxy_hop=max(0.0, hop.proxy),
            worker_first=max(hop.first_worker, hop.worker),
            worker_hop=max(0.0, hop.worker),
            worker_step=max(0.0, hop.worker_step),
            start_cpu=cal.start_up.cpu,
            tasks=cal.tasks,
            leave_lag=IDLE_POLL / 2 + cal.start_up.gone if cal.start_up.gone > 0 else 0.0,
            share_spread=cal.uneven.spread if cal.uneven is not None else 0.0,
            share_period=cal.uneven.period if cal.uneven is not None else 0.0,
            poll_lift=cal.polled.lift if cal.polled is not None else 0.0,
        )


def measured_quiet(cal: Calibration) -> bool:
    """The step times were measured with other processes taking at most `QUIET_SHARE` of the CPU: they are this
    machine's quiet ones, and the reference figures measured beside them meet them as they are."""
    return cal.steps_others_share is not None and cal.steps_others_share <= QUIET_SHARE


def step_work(mean: float, cv: float, rng: random.Random, overhead: float = 0.0) -> Callable[[], float]:
    """Draws of one step's CPU seconds: lognormal with the measured mean and spread (never negative), plus the
    worker's main-process `overhead` per step."""
    if cv <= 0:
        return lambda: mean + overhead
    sigma = math.sqrt(math.log(1 + cv * cv))
    mu = math.log(mean) - sigma * sigma / 2
    return lambda: rng.lognormvariate(mu, sigma) + overhead
