"""The benchmarks' `PrimesCall`: only calls whose answer is known, so that every answer can be checked."""

from __future__ import annotations

import pytest

from benchmarks._cluster import PrimesCall
from mrtr_worker.compute import primes


def test_a_call_without_a_known_count_is_refused_when_made() -> None:
    with pytest.raises(ValueError, match="no known count of primes up to 300,000,000"):
        PrimesCall(300_000_000, primes.DEFAULT_SEGMENT)


def test_a_call_with_a_known_count_has_its_steps() -> None:
    call = PrimesCall(100_000_000, 5_000_000)
    assert call.steps == 20
