"""The calibration table pools a why-shed cell's real runs: the why-shed table's one run and `calibrate.py`'s
runs of the same cell are one row, compared by their mean and shown with their range; other benchmarks' cells
stay rows of their own."""

from __future__ import annotations

from dataclasses import replace

from mrtr_lab.fleet_sim.calibrate import CALIBRATION, load
from mrtr_lab.fleet_sim.calibration import Compared, pooled, sources, table
from mrtr_lab.fleet_sim.notes import model_of_the_cluster
from mrtr_lab.fleet_sim.reference import Reference

WHY_SHED = "docs/benchmarks.md: why-shed, 2026-12-02 21:30 UTC"
STRAGGLER = "docs/benchmarks.md: straggler, 2026-12-02 21:00 UTC"
BALANCE = "docs/benchmarks.md: balance, 2026-12-02 21:40 UTC"
MEASURED = "measured by calibrate.py"


def _ref(scenario: str, strategy: str, completed: int, source: str, balance: str = "round_robin") -> Reference:
    return Reference(scenario, strategy, [], completed, 0, 0.0, 0.01, source=source, p99=5.0, balance=balance)


def test_a_why_shed_cells_runs_from_its_table_and_from_calibrate_are_one_cell() -> None:
    refs = [
        _ref("b", "stay", 7, WHY_SHED),
        _ref("a", "ours", 47, WHY_SHED),
        _ref("a", "ours", 72, STRAGGLER),
        _ref("b", "stay", 9, MEASURED),
        _ref("b", "stay", 10, MEASURED),
    ]
    cells = pooled(refs)
    assert list(cells) == [
        ("why-shed", "b", "stay", "round_robin"),
        ("why-shed", "a", "ours", "round_robin"),
        (STRAGGLER, "a", "ours", "round_robin"),
    ]
    assert [r.completed for r in cells[("why-shed", "b", "stay", "round_robin")]] == [7, 9, 10]
    assert sources(cells[("why-shed", "b", "stay", "round_robin")]) == f"{WHY_SHED}; {MEASURED} (2 runs)"


def test_the_balance_tables_cells_are_apart_by_balance() -> None:
    refs = [_ref("healthy", "ours", 34, BALANCE, b) for b in ("round_robin", "two_choices", "round_robin")]
    cells = pooled(refs)
    assert [len(runs) for runs in cells.values()] == [2, 1]


def _compared(source: str, runs: int, calls: tuple[float, float] | None, benchmark: str = "why-shed") -> Compared:
    return Compared(
        source=source,
        benchmark=benchmark,
        scenario="b",
        strategy="stay",
        balance="round_robin",
        repeats=runs,
        others_share=0.01,
        real_calls=8.8,
        model_calls=10.0,
        real_p99=51.0,
        model_p99=49.2,
        real_p50=44.0,
        model_p50=44.7,
        real_extra=89.0,
        model_extra=117.0,
        real_calls_range=calls,
        real_p99_range=None if calls is None else (47.9, 55.6),
    )


def test_the_table_shows_the_runs_range_beside_their_mean_and_judges_the_mean() -> None:
    pooled_row = _compared(f"{WHY_SHED}; {MEASURED} (4 runs)", 5, (7.0, 10.0))
    single = _compared(STRAGGLER, 1, None, benchmark=STRAGGLER)
    lines = table([pooled_row, single], load(CALIBRATION), seeds=6)
    rows = [line for line in lines if line.startswith("| docs/")]
    assert "| 5 | 1% | 9 | 7 to 10 | 10 | +14% | 51.0 | 47.9 to 55.6 | 49.2 | -4% |" in rows[0]
    assert rows[0].endswith("| yes |")
    assert "| 1 | 1% | 9 | - | 10 | +14% | 51.0 | - | 49.2 | -4% |" in rows[1]


def test_the_notes_name_each_pooled_cells_runs_and_whether_the_model_falls_among_them() -> None:
    inside = _compared(WHY_SHED, 5, (7.0, 10.0))
    outside = _compared(WHY_SHED, 3, (7.0, 9.0))
    alone = _compared(STRAGGLER, 1, None, benchmark=STRAGGLER)
    text = "\n".join(model_of_the_cluster(load(CALIBRATION), [inside, outside, alone]))
    assert "5 runs, calls 7 to 10, p99 47.9 to 55.6 s (the model 10 calls, 49.2 s)" in text
    assert "3 runs, calls 7 to 9, p99 47.9 to 55.6 s (the model 10 calls, 49.2 s, outside the runs' range)" in text
    assert text.count(" runs, calls ") == 2


def test_the_upgrades_first_calls_are_those_the_callers_began_with_wherever_the_cell_began() -> None:
    cal = load(CALIBRATION)
    late = [(6.4, 49.7), (6.4, 55.1), (6.5, 59.5), (49.7 + 6.4, 49.1), (55.1 + 6.4, 41.3)]
    cal.reference = [
        Reference(
            "b", "stay", [(start - 6.0, seconds) for start, seconds in late], 9, 0, 0.0, 0.01, leaving_seconds=78
        ),
        Reference("b", "stay", late, 9, 0, 0.0, 0.01, leaving_seconds=80),
    ]
    staying = _compared(MEASURED, 2, (9.0, 9.0))
    text = "\n".join(model_of_the_cluster(cal, [staying]))
    assert "The real old workers left in 78, 80 s, the model's in 117 s" in text
    assert "the real first calls of each run took 50 / 55 / 60; 50 / 55 / 60 s (in the order they ended" in text


def test_a_gap_just_past_the_target_shows_which_side_it_is() -> None:
    out = replace(_compared(WHY_SHED, 3, (8.0, 9.0)), real_calls=8.667, model_calls=10.0)
    row = next(line for line in table([out], load(CALIBRATION), seeds=6) if line.startswith("| docs/"))
    assert "| 9 | 8 to 9 | 10 | +15.4% |" in row
    assert row.endswith("| **no** |")
