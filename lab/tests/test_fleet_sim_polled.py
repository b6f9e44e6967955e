"""A polled worker's lift in the fleet simulator: while the benchmark reads a leaving worker's page every 50 ms,
that worker's step pool claims more of the shared cores (`polled_lift.py` measures how much on the real
cluster; `test_fleet_sim_uneven.py` runs that measurement briefly)."""

from __future__ import annotations

import random

import pytest
import simpy

from mrtr_lab.fleet_sim.calibrate import CALIBRATION, load
from mrtr_lab.fleet_sim.fleet import Fleet
from mrtr_lab.fleet_sim.host import Dedicated
from mrtr_lab.fleet_sim.model import Model
from mrtr_lab.fleet_sim.polled_lift import PolledLift
from mrtr_lb.balancing import Balance
from mrtr_worker.compute.policy import SheddingSettings


def _model(lift: float) -> Model:
    cal = load(CALIBRATION)
    cal.polled = PolledLift(lift, [lift], 40.0)
    return Model.from_calibration(cal)


def test_a_polled_workers_step_pool_gets_more_of_the_cores_until_the_polling_ends() -> None:
    model = _model(0.5)
    assert model.poll_lift == 0.5
    env = simpy.Environment()
    fleet = Fleet(env, model, SheddingSettings(enabled=False), Balance.ROUND_ROBIN, random.Random(1), shared_cores=2)
    instances = [fleet.add() for _ in range(3)]
    done: dict[str, float] = {}

    def job(index: int) -> simpy.events.ProcessGenerator:
        yield from instances[index].pool.compute(1.0)
        done[instances[index].name] = env.now

    for index in range(3):
        env.process(job(index))
    fleet.polled(instances[0], True)
    env.run()
    # Claims 1.5 : 1 : 1 on 2 cores: 6/7, 4/7 and 4/7 of a core; the polled one is done at 7/6 s, the others
    # have 1/3 left then and a core each.
    assert done["w1"] == pytest.approx(7 / 6)
    assert done["w2"] == done["w3"] == pytest.approx(1.5)

    fleet.polled(instances[0], False)
    for index in range(3):
        env.process(job(index))
    started = env.now
    env.run()
    assert [done[i.name] - started for i in instances] == pytest.approx([1.5] * 3)  # even again


def test_without_a_measured_lift_or_in_the_studys_layout_polling_changes_nothing() -> None:
    cal = load(CALIBRATION)
    cal.polled = None
    assert Model.from_calibration(cal).poll_lift == 0.0
    env = simpy.Environment()
    study = Fleet(env, _model(0.5), SheddingSettings(), Balance.ROUND_ROBIN, random.Random(1))
    instances = [study.add() for _ in range(2)]
    assert all(isinstance(i.pool, Dedicated) for i in instances)
    done: list[float] = []

    def job(index: int) -> simpy.events.ProcessGenerator:
        yield from instances[index].pool.compute(1.0)
        done.append(env.now)

    study.polled(instances[0], True)  # cores of its own: nothing to take from the others
    for index in range(2):
        env.process(job(index))
    env.run()
    assert done == pytest.approx([1.0, 1.0])
