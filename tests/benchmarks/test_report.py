"""The report: its one table helper, the figures kept as JSON and the pages rendered from them; every benchmark
module still importing.

Every benchmark builds its section's tables with the helper; these run in-process, nothing is measured.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from benchmarks import report
from benchmarks._tasks import Recovery
from benchmarks.report import (
    REPORT,
    block,
    figures_file,
    has_section,
    markdown_table,
    read_figures,
    render,
    render_page,
    write_section,
)
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
    """The task benchmark's recovery table, from its own report code."""
    recoveries = [Recovery("w2", 0.011, 0.02, 0.13, True, 512), Recovery("w1", 0.009, 0.018, 0.2, False, 512)]
    lines = _recovery_lines(recoveries, 0, 5000, 1000)
    table = [line for line in lines if line.startswith("|")]
    assert table[:2] == ["| trial | killed | claimed s | next step s | written again s | exact result and steps |",
                         "|---:|---|---:|---:|---:|---|"]  # fmt: skip
    assert table[2:] == ["| 1 | w2 | 0.01 | 0.02 | 0.13 | yes |", "| 2 | w1 | 0.01 | 0.02 | 0.20 | NO |"]


MODULES = sorted(
    ".".join(path.relative_to(BENCHMARKS.parent).with_suffix("").parts)
    for path in BENCHMARKS.rglob("*.py")
    if path.name not in ("__init__.py", "__main__.py") and "_peers" not in path.parts
)


@pytest.mark.parametrize("module", MODULES)
def test_every_benchmark_module_imports(module: str) -> None:
    importlib.import_module(module)


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


def test_a_section_is_kept_as_figures_and_rendered_from_them(tmp_path: Path) -> None:
    """The section's prose and its table's rows go to data/<name>.json beside the page; the page is their rendering."""
    report = tmp_path / "report.md"
    table = markdown_table(["path", "p50 ms"], "lr", [("direct", "1.20"), ("a|b", 3)])
    write_section("hop", "\n".join(["## Hop", "", "Said before.", "", *table, "", "Said after."]), report)
    figures = read_figures("hop", report)
    assert figures_file("hop", report) == tmp_path / "data" / "hop.json"
    assert figures["parts"] == [
        "## Hop\n\nSaid before.\n",
        {"columns": ["path", "p50 ms"], "align": "lr", "rows": [["direct", "1.20"], ["a|b", "3"]]},
        "\nSaid after.",
    ]
    assert figures["measured"] is not None
    assert render("hop", report) in report.read_text()
    figures["parts"][1]["rows"][0][1] = "9.99"  # the page follows the figures, never the other way round
    figures_file("hop", report).write_text(json.dumps(figures))
    assert "| direct | 9.99 |" in render_page(report)


def test_a_table_the_helper_would_not_write_so_is_kept_as_prose_and_rendered_unchanged(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    odd = "| | WAIT | no WAIT |\n|---|---:|---:|\n| **tasks** |  |  |"
    write_section("odd", odd, report)
    assert read_figures("odd", report)["parts"] == [odd]
    assert odd in report.read_text()


def test_missing_figures_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no figures for 'gone'"):
        read_figures("gone", tmp_path / "report.md")


PAGES = [REPORT, REPORT.parent / "redis.md", REPORT.parent / "lab" / "studies.md"]
"""The pages the benchmarks and the lab's studies write (other pages' marked sections are other tools')."""


@pytest.mark.parametrize("page", PAGES)
def test_every_page_with_figures_is_their_rendering(page: Path) -> None:
    """What the page shows is what its data/*.json files hold: edit the figures, then render (`python -m
    benchmarks.report PAGE`), never the page's sections."""
    assert "<!-- " in page.read_text()
    assert render_page(page) == page.read_text()
