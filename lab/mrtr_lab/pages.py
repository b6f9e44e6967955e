"""Where the lab's figures are shown: its studies' page, whose figures are kept in docs/lab/data/."""

from __future__ import annotations

from benchmarks.report import REPORT

STUDIES = REPORT.parent / "lab" / "studies.md"
"""The straggler, why-shed, balance, pause and fleet-simulator sections (the user's benchmarks stay on REPORT)."""
