"""A locustfile for the tests only: the suite's own user, checks and hooks, given a deliberately wrong answer table.

The user class is the suite's (`MrtrUser`, whose parameter sets and answer
tables are class attributes); only the table is wrong, so the run must end
with wrong answers counted and a non-zero exit code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mrtr_locust import plugin
from mrtr_locust.expected import PRIME_COUNTS, PrimesCase
from mrtr_locust.users import MrtrUser, weighted

WRONG_COUNT = PRIME_COUNTS[1_000_000] + 1
"""One more than pi(10^6): no correct worker ever answers this."""


class WrongTableUser(MrtrUser):
    tasks_per_second = 4.0
    p95_option = "mrtr_p95_short_ms"
    primes_cases = (PrimesCase(1_000_000, 250_000),)
    prime_counts: ClassVar[Mapping[int, int]] = {1_000_000: WRONG_COUNT}
    tasks = weighted((MrtrUser.count_primes, 1))


plugin.install()
