"""The reference cells the calibration reads from the studies' figures (docs/lab/data/*.json), never a page."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

import mrtr_lab
from benchmarks.report import markdown_table
from mrtr_lab.fleet_sim import tables
from mrtr_lab.fleet_sim.anchors import Anchor
from mrtr_lab.fleet_sim.documented import documented
from mrtr_lab.pages import STUDIES

LAB = Path(mrtr_lab.__file__).parent


def test_the_committed_figures_give_every_studys_reference_cells() -> None:
    found = {(ref.source.split(",")[0], ref.scenario, ref.strategy) for ref in documented(STUDIES)}
    assert {("docs/lab/data: why-shed", scenario, "ours") for scenario in "abc"} <= found
    assert ("docs/lab/data: straggler", "a", "stay") in found
    assert ("docs/lab/data: straggler-tasks", "tasks-a", "rule-off") in found
    assert ("docs/lab/data: balance", "a", "ours") in found


def test_a_missing_figures_file_is_refused_not_read_as_no_cells(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no figures for 'why-shed'"):
        documented(tmp_path / "studies.md")


def test_the_balance_tables_rows_become_one_reference_per_round_with_their_balance(tmp_path: Path) -> None:
    """The balance benchmark prints all rounds together: each round is a repeat, the calls split evenly."""
    data = tmp_path / "data"
    for name in ("why-shed", "straggler", "straggler-tasks"):
        _figures(data, name, "", [])
    table = markdown_table(
        ["cell", "balance", "calls completed", "p50 s", "p99 s", "max s", "wrong / errors"],
        "llrrrrr",
        [("all healthy", "`round_robin`", 131, 2.9, 3.6, 3.8, "0 / 0"),
         ("one at a quarter speed", "`two_choices`", 127, 2.4, 12.2, 13.0, "0 / 0")],
    )  # fmt: skip
    said = "6 closed-loop callers for 30 s a cell, each balance in turn, 2 rounds (figures: calls of all rounds)."
    _figures(data, "balance", said, [row.strip("| ").split(" | ") for row in table[2:]])
    found = documented(tmp_path / "studies.md")
    assert [(r.scenario, r.balance, r.completed) for r in found] == [
        ("healthy", "round_robin", 66),
        ("healthy", "round_robin", 65),
        ("a", "two_choices", 64),
        ("a", "two_choices", 63),
    ]
    assert {(r.p99, r.others_share, r.source) for r in found if r.scenario == "a"} == {
        (12.2, 0.03, "docs/lab/data: balance, 2026-12-02 05:20 UTC")
    }
    # each round after what its cluster served before it: healthy first, the other balance's cells idle
    assert [r.before for r in found if r.balance == "two_choices"] == [
        [("healthy", 30.0), ("idle", 30.0)],
        [("healthy", 30.0), ("idle", 30.0), ("a", 30.0), ("healthy", 30.0), ("idle", 30.0)],
    ]
    assert {r.run for r in found} == {"docs/lab/data: balance, 2026-12-02 05:20 UTC"}


def _figures(data: Path, name: str, said: str, rows: list[list[str]]) -> None:
    """A figures file as `benchmarks.report` writes it: prose, then a table of rows."""
    data.mkdir(exist_ok=True)
    table = {"columns": ["cell", "balance", "calls", "p50", "p99", "max", "wrong"], "align": "llrrrrr", "rows": rows}
    figures = {
        "section": name,
        "measured": "2026-12-02 05:20 UTC",
        "where": "x86_64; other processes used 3% of the CPU during it",
        "others_share": 0.03,
        "parts": [said, table],
    }
    (data / f"{name}.json").write_text(json.dumps(figures))


def test_the_anchors_table_comes_from_the_report_helper() -> None:
    anchors = tables.anchors([(Anchor("M/M/1", "round_robin", 0.5, 2.0), 2.04, 1000)], 100, 10_000)
    assert anchors[-1] == "| M/M/1 | 0.50 | 2.00 | 2.04 | 1000 |"


MODULES = sorted(
    ".".join(path.relative_to(LAB.parent).with_suffix("").parts)
    for path in LAB.rglob("*.py")
    if path.name not in ("__init__.py", "__main__.py")
)


@pytest.mark.parametrize("module", MODULES)
def test_every_lab_module_imports(module: str) -> None:
    importlib.import_module(module)
