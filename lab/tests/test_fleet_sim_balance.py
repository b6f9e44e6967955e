"""The balance benchmark's cells in the calibration: each after what its cluster served before it, a run's
percentiles of all its rounds' calls together, real and modelled alike."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, replace
from pathlib import Path

from mrtr_lab._balance_order import schedule
from mrtr_lab._why_shed.fleet import RoundRobin, Strategy
from mrtr_lab._why_shed.load import Call, Load
from mrtr_lab._why_shed.scenarios import Cell
from mrtr_lab.fleet_sim.calibrate import CALIBRATION, balance_references, load
from mrtr_lab.fleet_sim.calibration import compare, pooled
from mrtr_lab.fleet_sim.metrics import percentile
from mrtr_lab.fleet_sim.reference import Reference
from mrtr_lab.fleet_sim.replay import replay

SOURCE = "measured by calibrate.py: balance, 2026-12-03 06:26 UTC"


def _cell(scenario: str, seconds: list[float]) -> Cell:
    calls = [Call(100.0 + i, s, True) for i, s in enumerate(seconds)]
    return Cell(scenario, Strategy.OURS, Load(calls=calls), 20, 20.0 * len(calls), round_robin=RoundRobin((1, 0, 2), 2))


def test_a_balance_runs_cells_become_rounds_of_one_run_each_after_its_clusters_cells_before() -> None:
    order = schedule(["round_robin", "two_choices"], ["healthy", "a"], 2)
    measured = [(slot, _cell(slot.scenario, [4.0, 5.0])) for slot in order]
    found = balance_references(measured, 0.02, SOURCE, 30.0)
    assert [(r.scenario, r.balance) for r in found] == [(s.scenario, s.balance) for s in order]
    assert {r.run for r in found} == {SOURCE}
    assert found[0].before == []
    slow_first_round = found[2]  # round robin's slow cell: its healthy cell, then two choices' as idle time
    assert slow_first_round.before == [("healthy", 30.0), ("idle", 30.0)]
    assert (slow_first_round.pool_order, slow_first_round.next_pick) == ([1, 0, 2], 2)
    assert slow_first_round.calls == [(0.0, 4.0), (1.0, 5.0)]  # from the cell's first call


def test_a_cells_real_p99_is_of_all_a_runs_rounds_together_the_models_of_its_rounds_replayed_together() -> None:
    cal = load(CALIBRATION)
    order = schedule(["round_robin"], ["healthy"], 2)
    rounds = [[4.0] * 30 + [9.0], [4.0] * 30 + [5.0]]
    measured = [(slot, _cell("healthy", seconds)) for slot, seconds in zip(order, rounds, strict=True)]
    cal.reference = balance_references(measured, 0.01, SOURCE, 30.0)
    [cell] = compare(cal, seeds=2)
    assert cell.real_p99 == percentile([*rounds[0], *rounds[1]], 99)  # not the mean of the rounds' own p99s
    assert cell.real_calls == 31
    assert (cell.repeats, cell.source) == (1, f"{SOURCE} (2 rounds)")  # one run of two rounds
    replays = [[replay(cal, ref, seed) for seed in (1, 2)] for ref in cal.reference]
    pooled_p99 = statistics.fmean(percentile([*a.seconds, *b.seconds], 99) for a, b in zip(*replays, strict=True))
    assert cell.model_p99 == pooled_p99


def test_a_healthy_cell_after_a_slow_one_on_the_same_workers_replays_it_first_uncounted() -> None:
    """The once-slow worker's standing still judges it slow as the healthy cell begins: it hands calls on."""
    cal = load(CALIBRATION)
    fresh = next(r for r in cal.reference if r.scenario == "healthy" and r.run is not None and not r.before)
    after_slow = replace(fresh, before=[("healthy", 30.0), ("a", 30.0)])
    seeds = range(1, 4)
    cold = [replay(cal, fresh, seed) for seed in seeds]
    warm = [replay(cal, after_slow, seed) for seed in seeds]
    assert statistics.fmean(r.p99 for r in warm) > statistics.fmean(r.p99 for r in cold)
    assert all(len(r.seconds) == r.completed for r in warm)  # the cells before count nowhere
    assert statistics.fmean(r.completed for r in warm) < statistics.fmean(r.completed for r in cold) + 3


def test_a_file_from_before_the_history_reads_its_healthy_row_as_what_came_before(tmp_path: Path) -> None:
    raw = json.loads(CALIBRATION.read_text())
    ref = asdict(Reference("a", "ours", [], 70, 0, 0.0, 0.02, source="docs/benchmarks.md: straggler, x"))
    del ref["before"], ref["run"]
    raw["reference"] = [{**ref, "warmed_by": 45.0}]
    old = tmp_path / "calibration.json"
    old.write_text(json.dumps(raw))
    [read] = load(old).reference
    assert read.before == [("healthy", 45.0)]
    assert pooled([read])  # and it is a cell like any other


def test_the_notes_say_when_a_balance_cells_runs_are_further_apart_than_the_target_with_the_model_among_them() -> None:
    from mrtr_lab.fleet_sim.calibration import Compared
    from mrtr_lab.fleet_sim.notes import model_of_the_cluster

    def slow(balance: str, real: float, model: float, runs: tuple[float, float]) -> Compared:
        return Compared(
            *(SOURCE, "balance", "a", "ours", balance, 6, 0.01, 46.0, 48.0, real, model, 3.9, 3.8, None, None),
            real_calls_range=(46.0, 47.0),
            real_p99_range=runs,
        )

    cells = [slow("round_robin", 9.5, 6.8, (6.4, 12.5)), slow("two_choices", 16.8, 16.2, (16.3, 17.4))]
    text = "\n".join(model_of_the_cluster(load(CALIBRATION), cells))
    assert "round robin 9.5 s real (its runs 6.4 to 12.5 s) and 6.8 s modelled" in text
    assert "Out of 15 % of the runs' mean: round robin, whose runs differ" in text
    assert "two choices, whose" not in text


def test_cells_added_later_are_kept_beside_the_others_and_each_run_is_stamped(tmp_path: Path) -> None:
    from mrtr_lab.fleet_sim.calibrate import ADDED_BALANCE, _keep_added

    path = tmp_path / "calibration.json"
    kept = load(CALIBRATION)
    before = len(kept.reference)
    kept.parts.pop(ADDED_BALANCE, None)
    added = Reference("healthy", "ours", [(0.0, 4.0)], 1, 0, 0.0, 0.01, source=SOURCE, run=SOURCE)
    assert _keep_added(path, kept, [added], ADDED_BALANCE, "2026-12-03 06:26 UTC") == 0
    again = load(path)
    assert _keep_added(path, again, [replace(added, errors=1)], ADDED_BALANCE, "2026-12-03 07:00 UTC") == 1
    stored = load(path)
    assert len(stored.reference) == before + 2
    assert stored.parts[ADDED_BALANCE].startswith("2026-12-03 06:26 UTC to ")
    assert ", 2026-12-03 07:00 UTC to " in stored.parts[ADDED_BALANCE]
