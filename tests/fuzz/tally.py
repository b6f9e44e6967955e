"""Count the cases each property tried, by outcome, so the CI log shows how much was fuzzed.

Hypothesis says how many examples it generated only when asked, and not per
outcome; a test calls `TALLY.case(outcome)` once per example instead, and the
table is printed at the end of the session (`tests/conftest.py`). Under pytest-xdist
each worker process counts its own tests and hands its tally to the controller.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Tally:
    """Cases per test (pytest node id) and outcome, plus each test's wall time."""

    current: str = ""
    cases: dict[str, Counter[str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def case(self, outcome: str) -> None:
        """Record one example of the running test and what it led to (e.g. "rejected", "complete")."""
        self.cases.setdefault(self.current, Counter())[outcome] += 1

    def as_data(self) -> dict[str, dict[str, Any]]:
        """What a pytest-xdist worker sends the controller (plain JSON-able data)."""
        return {"cases": {node: dict(c) for node, c in self.cases.items()}, "seconds": dict(self.seconds)}

    def merge(self, data: dict[str, dict[str, Any]]) -> None:
        """Add a worker's tally (`as_data`) to this one."""
        for node, outcomes in data["cases"].items():
            self.cases.setdefault(node, Counter()).update(outcomes)
        self.seconds.update(data["seconds"])

    def lines(self) -> list[str]:
        rows = []
        for node, outcomes in self.cases.items():
            name = node.split("::", 1)[-1]
            detail = ", ".join(f"{outcome} {n}" for outcome, n in sorted(outcomes.items()))
            took = self.seconds.get(node)
            timing = f"{took:6.1f} s" if took is not None else "      -"
            rows.append(f"{sum(outcomes.values()):6d} cases {timing}  {name}  ({detail})")
        total = sum(sum(c.values()) for c in self.cases.values())
        rows.append(f"{total:6d} cases {sum(self.seconds.values()):6.1f} s  in all")
        return rows


TALLY = Tally()
TALLY_KEY = "fuzz_tally"
"""The key of a pytest-xdist worker's output that carries its tally."""
