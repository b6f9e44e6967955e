"""`longest_collatz`: the start not above `limit` whose Collatz chain is longest, as a resumable computation.

The Collatz map takes n to n/2 when n is even and to 3n+1 when it is odd; a
chain's length is the number of steps it takes to reach 1. The search walks
every start from 1 to `limit`, `chunk` starts per step, keeping only the best so
far: the whole state is five integers, sealed into `requestState` whenever the
computation is handed to another instance.

This module is what the step pool's processes import to run `step`: it imports
nothing but `mrtr_worker.plugin`'s `Computation` and `State` (which load no SDK).
"""

from __future__ import annotations

import math
from typing import Any

from mrtr_worker.plugin import Computation, State

DEFAULT_CHUNK = 10_000
"""Starts examined per step: tens of milliseconds, so a hand-back never waits long for a step boundary."""

KNOWN_LONGEST: dict[int, tuple[int, int]] = {
    10: (9, 19),
    100: (97, 118),
    1_000: (871, 178),
    10_000: (6_171, 261),
    100_000: (77_031, 350),
    300_000: (230_631, 442),
    1_000_000: (837_799, 524),
}
"""limit -> (start, steps): the published record holders (OEIS A006877, A006878); the tests' exact answers."""


def chain_steps(n: int) -> int:
    """Steps from `n` to 1 (an odd n takes two at once: 3n+1 is even, so it is halved next)."""
    steps = 0
    while n != 1:
        if n & 1:
            n = (3 * n + 1) >> 1
            steps += 2
        else:
            n >>= 1
            steps += 1
    return steps


def initial(arguments: dict[str, Any]) -> State:
    return {
        "limit": int(arguments["limit"]),
        "chunk": int(arguments.get("chunk") or DEFAULT_CHUNK),
        "next": 1,
        "best": 1,
        "best_steps": 0,
    }


def step(state: State) -> State:
    """Examine the next `chunk` starts. Pure and deterministic: any instance continues exactly."""
    best, best_steps = state["best"], state["best_steps"]
    first = state["next"]
    last = min(state["limit"], first + state["chunk"] - 1)
    for start in range(first, last + 1):
        steps = chain_steps(start)
        if steps > best_steps:  # strictly longer: the smallest start wins a tie
            best, best_steps = start, steps
    return {**state, "next": last + 1, "best": best, "best_steps": best_steps}


def done(state: State) -> bool:
    return bool(state["next"] > state["limit"])


def result(state: State) -> dict[str, Any]:
    return {"start": state["best"], "steps": state["best_steps"]}


def total_steps(state: State) -> int:
    remaining: int = max(0, state["limit"] - state["next"] + 1)
    chunk: int = state["chunk"]
    return math.ceil(remaining / chunk)


LONGEST_COLLATZ = Computation("longest_collatz", initial, step, done, result, total_steps)
