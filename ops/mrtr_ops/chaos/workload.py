"""What the task chaos mix asks of the fleet, and the exact answer to each: the model the checker holds it to.

Computations with known results (the worker's own reference, every step in
one process: `run_uninterrupted`), sized to span several 150 ms slices, so
that kills and freezes land in the middle of their work; and the `chaos`
pack's toxic tools, each with the error its task must end with.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache
from typing import Any

from mrtr_test_packs.chaos_jobs import EXITS, NEVER_ENDS, RAISES
from mrtr_worker.compute.computation import Computation, run_uninterrupted
from mrtr_worker.compute.hashchain import HASH_CHAIN
from mrtr_worker.compute.primes import COUNT_PRIMES

COMPUTATIONS: dict[str, Computation] = {c.name: c for c in (COUNT_PRIMES, HASH_CHAIN)}

TASK_CASES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("count_primes", {"limit": 2_000_000, "segment": 100_000}),
    ("count_primes", {"limit": 5_000_000, "segment": 200_000}),
    ("count_primes", {"limit": 10_000_000, "segment": 250_000}),
    ("hash_chain", {"seed": "chaos-a", "iterations": 300_000, "chunk": 10_000}),
    ("hash_chain", {"seed": "chaos-b", "iterations": 150_000, "chunk": 5_000}),
)
"""20 to 40 steps each: several slices, a few tenths of a second of CPU."""

MRTR_CASES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("count_primes", {"limit": 5_000_000, "segment": 250_000}),
    ("hash_chain", {"seed": "chaos-mrtr", "iterations": 200_000, "chunk": 20_000}),
)
"""Plain MRTR calls in the same run: they hop between workers on their time slices, through the same faults."""

TOXIC_ERRORS = {
    RAISES: "the chaos_raise job failed (RuntimeError)",
    EXITS: "the chaos_exit job failed (SystemExit)",
    NEVER_ENDS: "past the run-time limit of 3 s",
}
"""What each toxic task's error message must say (the never-ending one: its limit, in a longer sentence)."""


@dataclass(frozen=True)
class Expected:
    structured: dict[str, Any]
    steps: int


@cache
def _expected(tool: str, frozen: tuple[tuple[str, Any], ...]) -> Expected:
    result, steps = run_uninterrupted(COMPUTATIONS[tool], dict(frozen))
    return Expected(result, steps)


def expected(tool: str, arguments: dict[str, Any]) -> Expected | None:
    """The exact result and step count of a computation (None for a tool with no reference: a toxic one)."""
    if tool not in COMPUTATIONS:
        return None
    return _expected(tool, tuple(sorted(arguments.items())))


def pick_task(rng: random.Random) -> tuple[str, dict[str, Any]]:
    return rng.choice(TASK_CASES)


def pick_toxic(rng: random.Random) -> str:
    return rng.choice(sorted(TOXIC_ERRORS))
