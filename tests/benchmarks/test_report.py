"""The report's one table helper (`benchmarks.report.markdown_table`), and every benchmark module still importing.

Every benchmark builds its section's tables with the helper; these run in-process, nothing is measured.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from benchmarks import report
from benchmarks._tasks import Recovery
from benchmarks.fleet_sim import tables
from benchmarks.fleet_sim.anchors import Anchor
from benchmarks.fleet_sim.documented import _rows
from benchmarks.report import markdown_table
from benchmarks.tasks import _recovery_lines

BENCHMARKS = Path(report.__file__).parent


def test_a_table_is_a_header_an_aligned_rule_and_one_line_a_row() -> None:
    lines = markdown_table(["path", "p50 ms", "note"], "lrl", [("direct", "1.20", ""), ("proxy", 3, "ok")])
    assert lines == [
        "| path | p50 ms | note |",
        "|---|---:|---|",
        "| direct | 1.20 |  |",
        "| proxy | 3 | ok |",
    ]


def test_a_bar_in_a_cell_cannot_split_its_row() -> None:
    assert markdown_table(["a", "b"], "ll", [("x|y", "z")])[2] == "| x\\|y | z |"


def test_a_table_without_rows_is_its_header() -> None:
    assert markdown_table(["a"], "r", []) == ["| a |", "|---:|"]


@pytest.mark.parametrize(
    ("columns", "align", "rows", "problem"),
    [
        (["a", "b"], "l", [], "align needs one of l or r per column"),
        (["a", "b"], "lc", [], "align needs one of l or r per column"),
        (["a", "b"], "lr", [("only one",)], "a row of 1 cells in a table of 2 columns"),
        (["a"], "l", [("one", "two")], "a row of 2 cells in a table of 1 columns"),
    ],
)
def test_a_table_that_does_not_add_up_is_refused(
    columns: list[str], align: str, rows: list[tuple[str, ...]], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        markdown_table(columns, align, rows)


def test_a_benchmark_section_uses_it_and_reads_back() -> None:
    """The task benchmark's recovery table and the simulator's anchors, from their own report code."""
    recoveries = [Recovery("w2", 0.011, 0.02, 0.13, True, 512), Recovery("w1", 0.009, 0.018, 0.2, False, 512)]
    lines = _recovery_lines(recoveries, 0, 5000, 1000)
    table = [line for line in lines if line.startswith("|")]
    assert table[:2] == ["| trial | killed | claimed s | next step s | written again s | exact result and steps |",
                         "|---:|---|---:|---:|---:|---|"]  # fmt: skip
    assert table[2:] == ["| 1 | w2 | 0.01 | 0.02 | 0.13 | yes |", "| 2 | w1 | 0.01 | 0.02 | 0.20 | NO |"]
    anchors = tables.anchors([(Anchor("M/M/1", "round_robin", 0.5, 2.0), 2.04, 1000)], 100, 10_000)
    assert anchors[-1] == "| M/M/1 | 0.50 | 2.00 | 2.04 | 1000 |"


def test_the_simulator_reads_a_documented_table_back() -> None:
    """`fleet_sim.documented` reads the real figures back from docs/benchmarks.md: the rows, not the header."""
    block = "\n".join(markdown_table(["strategy", "calls completed", "note"], "lrl", [("hand-back", 12, "")]))
    assert _rows(block) == [["hand-back", "12", ""]]


MODULES = sorted(
    ".".join(path.relative_to(BENCHMARKS.parent).with_suffix("").parts)
    for path in BENCHMARKS.rglob("*.py")
    if path.name not in ("__init__.py", "__main__.py") and "_peers" not in path.parts
)


@pytest.mark.parametrize("module", MODULES)
def test_every_benchmark_module_imports(module: str) -> None:
    importlib.import_module(module)
