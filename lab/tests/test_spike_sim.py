"""The spike in the fleet simulator: what each setup does to a fleet-wide overload, on the real policy objects.

One seed, 100 instances (a few seconds a setup; the busy refusals at three): the figures are the model's, so
the assertions are about the shape the policy gives them, each of which a change to the policy can break.
"""

from __future__ import annotations

import pytest

from benchmarks.spike import PHASES, SETTINGS
from mrtr_lab.fleet_sim.calibrate import CALIBRATION, load
from mrtr_lab.fleet_sim.model import Model
from mrtr_lab.fleet_sim.spike import SimPhase, simulate

SIZE = 100
SPIKE_3X = 3


@pytest.fixture(scope="module")
def figures() -> dict[str, list[SimPhase]]:
    model = Model.from_calibration(load(CALIBRATION))
    return {name: simulate(model, settings, SIZE, list(PHASES)) for name, settings in SETTINGS.items()}


def test_the_default_circles_every_call_through_admission_refusals_in_the_spike(
    figures: dict[str, list[SimPhase]],
) -> None:
    default, off = figures["default"][SPIKE_3X], figures["shedding off"][SPIKE_3X]
    assert default.requests_per_call > 3 * off.requests_per_call
    assert off.requests_per_call == pytest.approx(1.0)


def test_the_fleet_full_rule_ends_the_circling(figures: dict[str, list[SimPhase]]) -> None:
    default, rule = figures["default"][SPIKE_3X], figures["fleet-full rule"][SPIKE_3X]
    assert rule.requests_per_call < default.requests_per_call / 2
    assert rule.goodput >= 0.9


def test_busy_refusals_trade_calls_past_their_deadline_for_clear_refusals() -> None:
    """At three instances, where the rule alone lets calls pass their deadline (at 100 it hardly does)."""
    model = Model.from_calibration(load(CALIBRATION))
    figures = {name: simulate(model, SETTINGS[name], 3, list(PHASES)) for name in ("fleet-full rule", "busy refusals")}
    rule, busy = figures["fleet-full rule"][SPIKE_3X], figures["busy refusals"][SPIKE_3X]
    assert rule.refused == 0
    assert busy.refused > 0
    assert rule.timed_out > 0
    assert busy.timed_out < rule.timed_out / 4
    assert busy.goodput >= 0.9
    steady = figures["busy refusals"][0]
    assert (steady.refused, steady.timed_out) == (0, 0)  # nothing is refused below capacity
