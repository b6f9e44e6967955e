"""The chaos schedule: which faults, in what order, when, and for how long; all drawn from one seed.

Faults never overlap: each one is done, held, undone and recovered from
before the next begins, so the fleet of three always keeps two workers
serving and every failure can be traced to one fault. Every kind comes once
(in a seeded order) before any repeats; a longer run repeats kinds at random.
The victim is not planned: it is drawn with a generator of the same seed,
among the workers busiest at the moment of the fault (`choose_victim`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

KINDS = ("kill9", "pause", "cut", "drain", "redis")
"""kill9: SIGKILL, then a restart under the same identity. pause: SIGSTOP (compose: docker pause), then resume.
cut: off the network, then back. drain: the operator's drain, then a replacement worker so capacity returns.
redis: the task store restarted (SIGTERM, which writes its append-only file out, then started on the same data);
no worker is the victim: every task in flight must go on from its last checkpoint."""

HOLD_SECONDS = {"kill9": (1.0, 3.0), "pause": (5.0, 8.0), "cut": (5.0, 8.0), "drain": (0.0, 0.0), "redis": (0.0, 0.0)}
"""How long each kind lasts before it is undone: a killed worker stays down a moment; a pause or a cut lasts
longer than the proxy takes to give up on a silent worker (two failed probes, about 3 s), so that happens;
Redis is down only as long as its restart takes (an outage with task calls refused is `test_tasks_fleet`'s)."""

FLEET_WIDE = frozenset({"redis"})
"""Kinds that strike the fleet's one shared part, not a worker: they have no victim to choose."""

PERIOD_SECONDS = 15.0
"""Room for one fault: its hold, its recovery (a restart takes a few seconds), and calm before the next."""


@dataclass(frozen=True)
class PlannedFault:
    kind: str
    at_s: float
    """Seconds after the load started (later if the fault before it took longer to recover)."""
    hold_s: float

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def plan(
    seed: int,
    duration: float,
    *,
    warmup: float = 8.0,
    tail: float = 10.0,
    kinds: Sequence[str] = KINDS,
) -> list[PlannedFault]:
    """Faults spread over `duration` seconds of load, after `warmup` and leaving `tail` to show the recovery."""
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds:
        raise ValueError(f"fault kinds must be some of {', '.join(KINDS)}; got {', '.join(kinds) or 'none'}")
    rng = random.Random(seed)
    window = max(0.0, duration - warmup - tail)
    count = max(len(kinds), int(window // PERIOD_SECONDS))
    order = rng.sample(list(kinds), len(kinds)) + [rng.choice(list(kinds)) for _ in range(count - len(kinds))]
    spacing = window / count if count else 0.0
    faults = []
    for index, kind in enumerate(order):
        low, high = HOLD_SECONDS[kind]
        at = warmup + index * spacing + rng.uniform(0.0, 0.2 * spacing)
        faults.append(PlannedFault(kind, round(at, 1), round(rng.uniform(low, high), 1)))
    return faults


def choose_victim(
    rng: random.Random, workers: Iterable[str], *, computing: dict[str, int], in_flight: dict[str, int]
) -> str:
    """A worker in the middle of a computation if there is one, else one with requests in flight, else any:
    the fault then hits work in progress, which must be resumed from its last state elsewhere."""
    everyone = sorted(workers)
    candidates = (
        [w for w in everyone if computing.get(w, 0) > 0] or [w for w in everyone if in_flight.get(w, 0) > 0] or everyone
    )
    if not candidates:
        raise RuntimeError("no worker to choose from")
    return rng.choice(candidates)
