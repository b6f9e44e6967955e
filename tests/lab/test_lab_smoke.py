"""The lab's smoke in the product's suite: a product change that breaks the simulator or its calibration shows here.

The lab's own tests (lab/tests, `scripts/bench lab-tests`) are heavy and stay out of the product's CI; this runs
in-process in a few seconds: the committed calibration and the studies' figures read as the simulator reads them,
then one small cell of the study on the real policy objects.
"""

from __future__ import annotations

from benchmarks.spike import PHASES, SETTINGS
from mrtr_lab.fleet_sim.calibrate import CALIBRATION, load
from mrtr_lab.fleet_sim.documented import documented
from mrtr_lab.fleet_sim.model import Model
from mrtr_lab.fleet_sim.spike import simulate
from mrtr_lab.fleet_sim.strategies import STRATEGIES
from mrtr_lab.fleet_sim.study import Cell, run_cell
from mrtr_lab.pages import STUDIES

CALLS = 100


def test_the_calibration_and_the_studies_figures_read_as_the_simulator_reads_them() -> None:
    cal = load(CALIBRATION)
    assert cal.reference, "calibration.json holds the real cells"
    read = documented(STUDIES)
    assert {ref.source.split(":")[1].split(",")[0].strip() for ref in read} == {
        "why-shed",
        "straggler",
        "straggler-tasks",
        "balance",
    }


def test_a_small_cell_of_the_study_runs_on_the_real_policy_and_loses_no_step() -> None:
    model = Model.from_calibration(load(CALIBRATION))
    result = run_cell(model, Cell("slow", 10, 0.9, STRATEGIES["hand-back"]), CALLS)
    assert result.figures.calls >= CALLS * 0.9
    assert result.figures.lost_steps == 0
    assert result.figures.rounds > 0  # the slow instance handed rounds back


def test_the_spike_runs_at_three_instances_on_the_real_policy_with_every_call_accounted_for() -> None:
    model = Model.from_calibration(load(CALIBRATION))
    for settings in SETTINGS.values():
        phases = simulate(model, settings, 3, list(PHASES))
        assert [p.phase for p in phases] == list(PHASES)
        for phase in phases:
            assert phase.arrived > 0
            assert phase.completed + phase.refused + phase.timed_out == phase.arrived
