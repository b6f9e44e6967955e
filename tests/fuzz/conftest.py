"""Hypothesis profiles and the per-property case count for the fuzz suite.

`ci` (the default) is derandomized and bounded so the whole suite runs in
about a minute on two cores and every run tries the same cases;
`HYPOTHESIS_PROFILE=long` tries many more, with fresh random cases each run
and failures remembered in `.cache/hypothesis` to be replayed first next time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests.fuzz.budget import PROFILE
from tests.fuzz.tally import TALLY

_SLOW_IS_FINE = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=100,
    print_blob=True,
    suppress_health_check=_SLOW_IS_FINE,
)
settings.register_profile(
    "long",
    deadline=None,
    max_examples=2_000,
    database=DirectoryBasedExampleDatabase(str(Path(__file__).parents[2] / ".cache" / "hypothesis")),
    print_blob=True,
    suppress_health_check=_SLOW_IS_FINE,
)
settings.load_profile(PROFILE)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    TALLY.current = item.nodeid
    try:
        return (yield)
    finally:
        TALLY.current = ""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.nodeid in TALLY.cases:
        TALLY.seconds[report.nodeid] = report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TALLY.cases:
        return
    terminalreporter.section(f"fuzz: cases tried per property (hypothesis profile {PROFILE!r})")
    for line in TALLY.lines():
        terminalreporter.write_line(line)
