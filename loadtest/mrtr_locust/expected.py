"""Known answers, computed here without the worker's code (the loadtest image does not have it).

`tests/loadtest/test_expected.py` checks every table and reference below
against `mrtr_worker`, so they cannot drift apart.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import cache
from typing import Any

PRIME_COUNTS: dict[int, int] = {
    1_000_000: 78_498,
    2_000_000: 148_933,
    5_000_000: 348_513,
    10_000_000: 664_579,
    20_000_000: 1_270_607,
    50_000_000: 3_001_134,
    100_000_000: 5_761_455,
    200_000_000: 11_078_937,
}
"""pi(n), the number of primes not above n (published values of the prime-counting function)."""

LOGINS_BY_VERSION: dict[str, tuple[str, ...]] = {
    "1": ("github_login", "google_login"),
    "2": ("github_login", "google_login", "microsoft_login"),
}
"""The logins `link_accounts` needs on each worker version (the `X-Worker-Version` header's value)."""


# --- the parameter sets the users draw from ---------------------------------------------------------


@dataclass(frozen=True)
class PrimesCase:
    limit: int
    segment: int

    @property
    def arguments(self) -> dict[str, Any]:
        return {"limit": self.limit, "segment": self.segment}

    @property
    def steps(self) -> int:
        """Segments sieved by one run (numbers 2..limit), whichever instances ran them."""
        return math.ceil((self.limit - 1) / self.segment) if self.limit > 1 else 0


@dataclass(frozen=True)
class HashChainCase:
    seed: str
    iterations: int
    chunk: int

    @property
    def arguments(self) -> dict[str, Any]:
        return {"seed": self.seed, "iterations": self.iterations, "chunk": self.chunk}

    @property
    def steps(self) -> int:
        return math.ceil((self.iterations - 1) / self.chunk)


@dataclass(frozen=True)
class PiCase:
    samples: int
    seed: int
    chunk: int
    ask_to_refine: bool = False
    refine: bool = False
    """With `ask_to_refine`: the scripted answer to the midway question (yes doubles the samples)."""

    @property
    def arguments(self) -> dict[str, Any]:
        return {"samples": self.samples, "seed": self.seed, "chunk": self.chunk, "ask_to_refine": self.ask_to_refine}

    @property
    def drawn(self) -> int:
        return self.samples * 2 if self.ask_to_refine and self.refine else self.samples

    @property
    def steps(self) -> int:
        first = math.ceil(self.samples / self.chunk)
        return first + (first if self.drawn > self.samples else 0)


PRIMES_CASES = (
    PrimesCase(10_000_000, 1_000_000),
    PrimesCase(20_000_000, 1_000_000),
    PrimesCase(50_000_000, 2_500_000),
    PrimesCase(100_000_000, 2_500_000),
)
HASH_CHAIN_CASES = (
    HashChainCase("mrtr-locust", 400_000, 50_000),
    HashChainCase("sep-2322", 800_000, 100_000),
)
PI_CASES = (
    PiCase(300_000, 7, 30_000),
    PiCase(500_000, 42, 50_000),
)
PI_REFINE_CASES = (
    PiCase(200_000, 3, 20_000, ask_to_refine=True, refine=True),
    PiCase(150_000, 11, 25_000, ask_to_refine=True, refine=False),
)


# --- self-contained references (straight loops, no checkpoints) ---------------------------------------


@cache
def hash_chain(seed: str, iterations: int) -> str:
    """SHA-256 applied `iterations` times to the seed's bytes; the hex digest."""
    digest = seed.encode()
    for _ in range(iterations):
        digest = hashlib.sha256(digest).digest()
    return digest.hex()


_MASK = (1 << 64) - 1
_SCALE = float(1 << 53)
_MULTIPLIER = 0x2545F4914F6CDD1D


@cache
def estimate_pi(samples: int, seed: int) -> dict[str, Any]:
    """The seeded Monte Carlo estimate: splitmix64 seeding, xorshift64* draws, one uninterrupted loop."""
    z = (seed + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    x = (z ^ (z >> 31)) or 1
    inside = 0
    for _ in range(samples):
        x ^= x >> 12
        x ^= (x << 25) & _MASK
        x ^= x >> 27
        a = (((x * _MULTIPLIER) & _MASK) >> 11) / _SCALE
        x ^= x >> 12
        x ^= (x << 25) & _MASK
        x ^= x >> 27
        b = (((x * _MULTIPLIER) & _MASK) >> 11) / _SCALE
        inside += a * a + b * b < 1.0
    return {"estimate": 4 * inside / samples if samples else 0.0, "samples": samples, "inside": inside}


def primes_result(case: PrimesCase) -> dict[str, Any]:
    return {"count": PRIME_COUNTS[case.limit]}


def hash_chain_result(case: HashChainCase) -> dict[str, Any]:
    return {"digest": hash_chain(case.seed, case.iterations), "iterations": case.iterations}


def pi_result(case: PiCase) -> dict[str, Any]:
    return estimate_pi(case.drawn, case.seed)


def precompute() -> None:
    """Fill the reference caches before users start (a second or so of CPU), so no user blocks on them."""
    for chain in HASH_CHAIN_CASES:
        hash_chain_result(chain)
    for pi in (*PI_CASES, *PI_REFINE_CASES):
        pi_result(pi)
