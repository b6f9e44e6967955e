"""Stepping aside in the fleet simulator: the real `Standing.aside` and the proxy's pool, at the study's slow cell.

Under hand-back with round robin, a slow instance hands each round on at once and the retry reaches the proxy
before another request moves its cursor: the instance after it in the pool serves its share on top of its own.
Stepping aside (`MRTR_WORKER_STEP_ASIDE`) takes the slow one out of rotation, and the pool skips it fairly.
"""

from __future__ import annotations

import statistics

import pytest

from mrtr_lab.fleet_sim.calibrate import CALIBRATION, load
from mrtr_lab.fleet_sim.model import Model
from mrtr_lab.fleet_sim.strategies import STRATEGIES
from mrtr_lab.fleet_sim.study import Cell, _Run

MODEL = Model.from_calibration(load(CALIBRATION))
CALLS = 1000


def _served(strategy: str, seed: int) -> tuple[float, float, float]:
    """The slow instance's requests against the median instance's, and the steps of the instance after it in the
    pool against the median of the others'."""
    run = _Run(MODEL, Cell("slow", 10, 0.9, STRATEGIES[strategy]), seed, CALLS)
    run.go()
    proxy = run.fleet.proxy
    order = [backend.url for backend in proxy.pool]
    slow = next(name for name, instance in proxy.instances.items() if instance.speed < 1)
    after = order[(order.index(slow) + 1) % len(order)]
    requests = {backend.url: backend.requests for backend in proxy.pool}
    steps = {name: instance.steps for name, instance in proxy.instances.items()}
    others = statistics.median(steps[name] for name in order if name not in (slow, after))
    return requests[slow] / statistics.median(requests.values()), steps[after] / others, others


@pytest.mark.parametrize("seed", [1, 2])
def test_a_slow_instance_in_rotation_doubles_up_the_one_after_it(seed: int) -> None:
    requests, after, _ = _served("hand-back", seed)
    assert requests >= 0.9  # it gets its turn like any other, and hands each round on
    assert after > 1.08  # the next in the pool takes them


@pytest.mark.parametrize("seed", [1, 2])
def test_a_slow_instance_stepping_aside_leaves_rotation_and_its_share_spreads(seed: int) -> None:
    requests, after, others = _served("hand-back+step-aside", seed)
    assert requests < 0.3  # in rotation only while a probe is due
    assert 0.9 < after < 1.05
    assert others > 0
