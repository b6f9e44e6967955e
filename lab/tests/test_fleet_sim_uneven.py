"""The kernel's uneven share in the fleet simulator: its measurement's arithmetic, and how the model draws it.

`uneven_share.py` measures how far apart equal step processes get on the
machine's cores and fits the model's draws to it; the model's host gives a
step pool's jobs a claim of its weight times its luck. The measurement itself
(long calls on a real cluster for minutes) runs in `calibrate.py
--uneven-share`; here it runs for seconds, and the arithmetic and the model
are checked on known inputs. The real cluster started here also serves the
other brief real-cluster checks of the replay's inputs (the polled lift, the
record of where the proxy's round robin stands): start-ups dominate on two cores.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterator

import pytest
import simpy

from benchmarks._cluster import TOOL_PACKS, PrimesCall, stop_cluster
from mrtr_client import Client
from mrtr_lab._why_shed.fleet import RoundRobin, round_robin
from mrtr_lab.fleet_sim.calibrate import CALIBRATION, load
from mrtr_lab.fleet_sim.fleet import Fleet
from mrtr_lab.fleet_sim.host import Dedicated, Group, Host
from mrtr_lab.fleet_sim.model import Model
from mrtr_lab.fleet_sim.polled_lift import polled_lift
from mrtr_lab.fleet_sim.replay import replay
from mrtr_lab.fleet_sim.uneven_share import (
    PERIODS,
    UnevenShare,
    fit,
    small_sample,
    uneven_share,
    window_factor,
    window_spread,
)
from mrtr_lb.balancing import Balance
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_worker.compute import primes
from mrtr_worker.compute.policy import SheddingSettings


def test_a_luckier_group_gets_a_larger_share_and_the_cores_stay_full() -> None:
    env = simpy.Environment()
    host = Host(env, cores=2)
    groups = [host.group(f"w{i}-steps", nice=10) for i in range(3)]
    done: dict[int, float] = {}

    def job(index: int) -> simpy.events.ProcessGenerator:
        yield groups[index].run(1.0)
        done[index] = env.now

    for index in range(3):
        env.process(job(index))
    host.set_luck({id(groups[0]): 2.0})
    env.run()
    # Claims 2:1:1 on 2 cores: 1.0, 0.5, 0.5 of a core; the first is done at 1 s, the others then get a core
    # each for their remaining half.
    assert done[0] == pytest.approx(1.0)
    assert done[1] == pytest.approx(1.5)
    assert done[2] == pytest.approx(1.5)


def test_the_spread_across_processes_is_read_per_window() -> None:
    # Three processes sampled every 0.1 s: the first gets twice the CPU of the others throughout.
    samples = [(k / 10, [0.1 * k, 0.05 * k, 0.05 * k]) for k in range(201)]
    got = window_spread(samples, 5.0)
    assert got == pytest.approx(statistics.pstdev([2, 1, 1]) / statistics.fmean([2, 1, 1]))
    even = [(k / 10, [0.05 * k] * 3) for k in range(201)]
    assert window_spread(even, 5.0) == pytest.approx(0.0)
    assert window_spread(even[:10], 5.0) is None  # shorter than one window


def test_a_window_over_many_draws_keeps_less_of_their_spread() -> None:
    # A 1 s window meets the end of a 5 s draw one time in five, and then splits at random.
    assert window_factor(5.0, 1.0) == pytest.approx((0.8 + 0.2 * 2 / 3) ** 0.5, rel=0.01)
    assert window_factor(1.0, 1.0) == pytest.approx((2 / 3) ** 0.5, rel=0.01)  # two draws, a random split
    assert window_factor(1.0, 100.0) == pytest.approx(0.1, rel=0.02)  # about a hundred draws
    assert small_sample(3) == pytest.approx(0.7236, rel=1e-3)


def test_the_fit_finds_the_draws_that_made_the_spreads() -> None:
    """Spreads computed from known draws (spread 0.2, 4 s each) come back as those draws."""
    spread, period = 0.2, 4.0
    measured = {w: spread * small_sample(3) * window_factor(period, w) for w in (1.25, 2.5, 5.0, 10.0, 20.0)}
    assert fit(measured) == pytest.approx((spread, period), rel=0.02)
    assert fit({}) == (0.0, 20.0)


def test_the_model_draws_luck_only_for_step_pools_on_the_shared_machine() -> None:
    cal = load(CALIBRATION)
    cal.uneven = UnevenShare(spread=0.2, period=2.0)
    model = Model.from_calibration(cal)
    assert (model.share_spread, model.share_period) == (0.2, 2.0)
    env = simpy.Environment()
    fleet = Fleet(env, model, SheddingSettings(), Balance.ROUND_ROBIN, random.Random(1), shared_cores=2)
    instances = [fleet.add() for _ in range(3)]
    over = {"now": False}
    seen: list[list[float]] = []

    def watch() -> simpy.events.ProcessGenerator:
        for _ in range(5):
            yield env.timeout(2.0)
            seen.append([_luck(i.pool) for i in instances])
        over["now"] = True

    env.process(fleet.uneven(lambda: over["now"]))
    env.process(watch())
    env.run()  # ends: the draws stop once over
    assert all(_luck(i.group) == 1.0 for i in instances)  # the worker's own event loop is not a step process
    draws = [luck for row in seen for luck in row]
    assert len(set(draws)) == len(draws)  # drawn afresh, each pool its own
    assert 0.05 < statistics.pstdev(draws) / statistics.fmean(draws) < 0.4

    study = Fleet(simpy.Environment(), model, SheddingSettings(), Balance.ROUND_ROBIN, random.Random(1))
    assert list(study.uneven(lambda: False)) == []  # cores of its own per instance: nothing to draw


def _luck(cpu: Group | Dedicated) -> float:
    assert isinstance(cpu, Group)  # the shared machine's layout
    return cpu.luck


@pytest.fixture(scope="module")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Three workers behind the proxy, for the brief runs of both measurements."""
    work = tmp_path_factory.mktemp("cluster")
    cluster = LocalCluster(
        ClusterConfig(workers=3, port=0, tool_packs=TOOL_PACKS, work_dir=work, redis=False, ready_timeout=300)
    )
    try:
        cluster.start()
        yield cluster
    finally:
        stop_cluster(cluster)


BRIEF_CALL = PrimesCall(500_000_000, primes.DEFAULT_SEGMENT)
"""A call of a few seconds."""


def test_the_measurement_samples_one_stepping_process_per_worker_of_a_real_cluster(real_cluster: LocalCluster) -> None:
    """`uneven_share` on a real three-worker cluster, briefly: a call of a few seconds on each worker, sampled for
    2.5 s; the windows that fit are measured, the model's draws fitted to them."""
    found = uneven_share(real_cluster, BRIEF_CALL, seconds=2.5, trials=1)
    assert found.processes == 3
    assert set(found.measured) == {"1.25", "2.5"}
    assert all(0 <= spread < 1 for spread in found.measured.values())
    assert found.spread >= 0
    assert found.period in PERIODS


def test_the_polled_lift_compares_the_polled_workers_step_process_with_the_others(real_cluster: LocalCluster) -> None:
    """`polled_lift` on the same cluster, briefly: two trials of 1 s, each polling another worker. A step
    process gets at most a core, the others together at least what one core leaves over, so a lift stays well
    inside (-1, 2) when the right processes were read (a pid of another process would read 0 CPU: -1)."""
    found = polled_lift(real_cluster, PrimesCall(200_000_000, primes.DEFAULT_SEGMENT), seconds=1.0, trials=2)
    assert len(found.trials) == 2
    assert all(-0.9 < lift < 2 for lift in found.trials)
    assert found.lift == pytest.approx(statistics.fmean(found.trials))
    assert found.seconds == 1.0


def test_a_seed_reproduces_a_replay_with_its_draws_of_luck() -> None:
    cal = load(CALIBRATION)
    cal.uneven = UnevenShare(spread=0.3, period=0.25)
    ref = next(r for r in cal.reference if r.scenario == "c")
    runs = [replay(cal, ref, seed=3) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    assert replay(cal, ref, seed=4) != runs[0]


def test_a_cell_records_where_the_real_proxys_round_robin_stands(real_cluster: LocalCluster) -> None:
    """why-shed's record of the round robin (`round_robin`, from `/lb/backends`' `next`) on the same cluster (one
    start serves the module): a request through the proxy moves the next pick one place on in the pool's order."""
    names = list(real_cluster.workers)
    before = round_robin(real_cluster, names)
    assert before is not None
    assert before.next is not None
    assert sorted(before.order) == list(range(len(names)))
    with Client(real_cluster.mcp_url) as client:
        assert client.list_tools()  # one request, one pick
    place = before.order.index(before.next)
    assert round_robin(real_cluster, names) == RoundRobin(before.order, before.order[(place + 1) % len(names)])
