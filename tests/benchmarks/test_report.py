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
from benchmarks.fleet_sim.documented import _rows, documented
from benchmarks.report import block, has_section, markdown_table, write_section
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


def test_the_balance_tables_rows_become_one_reference_per_round_with_their_balance(tmp_path: Path) -> None:
    """The balance benchmark prints all rounds together: each round is a repeat, the calls split evenly."""

    section = tmp_path / "benchmarks.md"
    rows = "\n".join(
        markdown_table(
            ["cell", "balance", "calls completed", "p50 s", "p99 s", "max s", "wrong / errors"],
            "llrrrrr",
            [("all healthy", "`round_robin`", 131, 2.9, 3.6, 3.8, "0 / 0"),
             ("one at a quarter speed", "`two_choices`", 127, 2.4, 12.2, 13.0, "0 / 0")],
        )
    )  # fmt: skip
    stamp = "_Measured 2026-12-02 05:20 UTC on x86_64; other processes used 3% of the CPU during it._"
    said = "6 closed-loop callers for 30 s a cell, each balance in turn, 2 rounds (figures: calls of all rounds)."
    section.write_text(f"<!-- balance:start -->\n{said}\n\n{rows}\n\n{stamp}\n<!-- balance:end -->\n")
    found = documented(section)
    assert [(r.scenario, r.balance, r.completed) for r in found] == [
        ("healthy", "round_robin", 66),
        ("healthy", "round_robin", 65),
        ("a", "two_choices", 64),
        ("a", "two_choices", 63),
    ]
    assert {(r.p99, r.others_share, r.source) for r in found if r.scenario == "a"} == {
        (12.2, 0.03, "docs/benchmarks.md: balance, 2026-12-02 05:20 UTC")
    }
    # each round after what its cluster served before it: healthy first, the other balance's cells idle
    assert [r.before for r in found if r.balance == "two_choices"] == [
        [("healthy", 30.0), ("idle", 30.0)],
        [("healthy", 30.0), ("idle", 30.0), ("a", 30.0), ("healthy", 30.0), ("idle", 30.0)],
    ]
    assert {r.run for r in found} == {"docs/benchmarks.md: balance, 2026-12-02 05:20 UTC"}


def test_a_block_inside_a_section_is_written_again_alone(tmp_path: Path) -> None:
    """The fleet simulator's calibration sits inside its section and is written again without the study."""
    report = tmp_path / "report.md"
    inner = block("inner", "calibration, first")
    write_section("outer", f"study before\n\n{inner}\n\nstudy after", report)
    assert has_section("inner", report)
    assert not has_section("missing", report)
    write_section("inner", "calibration, second", report)
    text = report.read_text()
    assert "calibration, second" in text
    assert "calibration, first" not in text
    assert text.index("study before") < text.index("calibration, second") < text.index("study after")
    assert text.count("<!-- outer:end -->") == 1
    assert text.count("<!-- inner:start -->") == 1
