"""Pure figures of one run: lost work, latency percentiles and when new instances carry their share.

Kept free of I/O so the unit tests pin them: these are the numbers the
comparison stands on.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

FAIR_SHARE_TOLERANCE = 0.9
"""New instances "carry their share" once they run at least 90 % of their fair share of the steps."""
SHARE_WINDOW = 1.0
"""Seconds of step counts each share is measured over (one scrape interval would be all noise)."""


@dataclass(frozen=True)
class Sample:
    """One scrape of every live worker's step counter, `at` seconds since the run started."""

    at: float
    steps: Mapping[str, float]


def lost_steps(executed: float, completed_calls: int, steps_per_call: int) -> float:
    """Steps the workers computed that no completed answer needed: thrown away by kills and give-ups.

    Every call needs exactly `steps_per_call` steps wherever they run; a checkpoint hand-back loses none
    of them (the state carries every finished step), a call started over computes its first part twice.
    """
    return executed - completed_calls * steps_per_call


def final_steps(samples: Sequence[Sample]) -> dict[str, float]:
    """Each instance's last reading: a departed worker's counter is gone with it, its last scrape stays."""
    last: dict[str, float] = {}
    for sample in samples:
        last.update(sample.steps)
    return last


def seconds_to_share(
    samples: Sequence[Sample],
    new: Collection[str],
    added_at: float,
    fair_share: float,
    *,
    window: float = SHARE_WINDOW,
    tolerance: float = FAIR_SHARE_TOLERANCE,
) -> float | None:
    """Seconds after `added_at` until the `new` instances ran `tolerance` x `fair_share` of the steps in a window.

    The share at a sample is the new instances' steps over all instances' steps since the sample `window`
    seconds earlier. None: never within the run.
    """
    for index, sample in enumerate(samples):
        if sample.at < added_at:
            continue
        earlier = _sample_before(samples[:index], sample.at - window)
        if earlier is None:
            continue
        # A new instance absent earlier counts from zero; an old one a scrape missed is left out of both.
        ran = {
            name: steps - earlier.steps.get(name, 0.0)
            for name, steps in sample.steps.items()
            if name in earlier.steps or name in new
        }
        total = sum(ran.values())
        if total > 0 and sum(ran[name] for name in new if name in ran) / total >= tolerance * fair_share:
            return sample.at - added_at
    return None


def _sample_before(samples: Sequence[Sample], moment: float) -> Sample | None:
    """The latest sample at or before `moment`."""
    for sample in reversed(samples):
        if sample.at <= moment:
            return sample
    return None


def longest_in_flight(calls: Sequence[tuple[float, float]], moment: float) -> float:
    """Of the calls (start, seconds) in flight at `moment`, the longest time one still had to run (0 if none)."""
    return max((start + seconds - moment for start, seconds in calls if start <= moment < start + seconds), default=0.0)
