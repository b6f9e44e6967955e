"""`count_primes`: the number of primes not above `limit`, by a segmented sieve of Eratosthenes.

Each step sieves one segment of `segment` numbers with the base primes up to
sqrt(limit); the checkpoint is just where the next segment starts and the
count so far.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from mrtr_worker.compute.computation import Computation, State

DEFAULT_SEGMENT = 5_000_000
"""Numbers sieved per step: a few tens of milliseconds of CPU, the granularity of shedding."""
MAX_LIMIT = 2_000_000_000

KNOWN_COUNTS = {
    10: 4,
    100: 25,
    1_000: 168,
    10_000: 1_229,
    100_000: 9_592,
    1_000_000: 78_498,
    2_000_000: 148_933,
    5_000_000: 348_513,
    10_000_000: 664_579,
    20_000_000: 1_270_607,
    50_000_000: 3_001_134,
    100_000_000: 5_761_455,
    200_000_000: 11_078_937,
    500_000_000: 26_355_867,
    1_000_000_000: 50_847_534,
    2_000_000_000: 98_222_287,
}
"""pi(n) for checking answers (published values of the prime-counting function)."""


@cache
def _base_primes(bound: int) -> tuple[int, ...]:
    sieve = bytearray([1]) * (bound + 1)
    sieve[0:2] = b"\x00\x00"[: min(2, bound + 1)]
    for p in range(2, math.isqrt(bound) + 1):
        if sieve[p]:
            sieve[p * p :: p] = bytes(len(range(p * p, bound + 1, p)))
    return tuple(i for i, is_prime in enumerate(sieve) if is_prime)


def initial(arguments: dict[str, Any]) -> State:
    limit = int(arguments["limit"])
    segment = int(arguments.get("segment") or DEFAULT_SEGMENT)
    return {"limit": limit, "segment": segment, "next": 2, "count": 0}


def step(state: State) -> State:
    limit, low = state["limit"], state["next"]
    high = min(limit + 1, low + state["segment"])
    sieve = bytearray([1]) * (high - low)
    for p in _base_primes(math.isqrt(limit)):
        start = max(p * p, (low + p - 1) // p * p)
        if start >= high:
            continue
        sieve[start - low :: p] = bytes(len(range(start, high, p)))
    return {**state, "next": high, "count": state["count"] + sum(sieve)}


def done(state: State) -> bool:
    return bool(state["next"] > state["limit"])


def result(state: State) -> dict[str, Any]:
    return {"count": state["count"]}


def total_steps(state: State) -> int:
    span = state["limit"] - 1  # numbers 2..limit
    return 0 if span <= 0 else math.ceil(span / state["segment"])


COUNT_PRIMES = Computation("count_primes", initial, step, done, result, total_steps)
