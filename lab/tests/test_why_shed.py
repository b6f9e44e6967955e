"""`why_shed.py` end to end, tiny: the table and the picture are written where told, every answer checked.

One run as `scripts/bench why-shed` runs it, as a subprocess: a rolling
upgrade and a scale-out with checkpoint shedding (the cells that exercise
an instance leaving, one joining, the step counts and the share), the
section and its figures written beside a temporary report, never the docs.
Figures are not asserted, only that they exist.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.report import read_figures, tables

HANG_GUARD_SECONDS = 900
"""Only against a hang: starting workers on a saturated two-core box takes minutes."""
TINY = [
    *("--scenarios", "bc", "--strategies", "ours", "--duration", "2", "--warmup", "1"),
    *("--callers", "2", "--long-callers", "2", "--overload", "6"),
    *("--limit", "10000000", "--long-limit", "20000000", "--upgrade-window", "0"),
]


@pytest.mark.slow
def test_a_tiny_run_writes_its_table_and_picture_with_every_answer_checked(tmp_path: Path) -> None:
    report, picture = tmp_path / "benchmarks.md", tmp_path / "why-shed.png"
    run = subprocess.run(
        [
            *(sys.executable, "-m", "mrtr_lab.why_shed", *TINY, "--trace", "1"),
            *("--report-file", str(report), "--picture", str(picture)),
        ],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output  # non-zero when any answer was wrong or any call failed
    section = report.read_text()
    assert "<!-- why-shed:start -->" in section
    rows = re.findall(r"^\| checkpoint shedding \| (\d+) \|.*\| (\d+) / (\d+) \|", section, re.M)
    assert len(rows) == 2, section  # one row per scenario run
    for completed, wrong, errors in rows:
        assert int(completed) > 0, section
        assert (wrong, errors) == ("0", "0"), section
    assert "carried their share after" in section, section
    figures = read_figures("why-shed", report)  # the section is rendered from its figures, kept beside it
    assert [row[0] for _, table in tables(figures) for row in table["rows"]] == ["checkpoint shedding"] * 2
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    traced = re.findall(r"^  +[\d.]+ s, started at +[\d.]+ s: .*:complete:\d+$", run.stdout, re.M)
    assert len(traced) == 2, output  # each cell's slowest call, hop by hop, ending in its complete exchange
