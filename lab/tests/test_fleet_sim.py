"""The fleet simulator: its CPU model, its figures' invariants, and a tiny end-to-end run as `scripts/bench` runs it.

The simulator runs in this process (SimPy, no workers): a cell of ten
instances and a few hundred calls takes a second or two. The figures are
never asserted as targets, only the rules that must hold whatever the
parameters: a seed reproduces a run, hedging duplicates work, staying where
you land and handing back lose none.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import simpy

from benchmarks.report import markdown_table, read_figures, write_section
from mrtr_lab.fleet_sim.calibrate import CALIBRATION, load
from mrtr_lab.fleet_sim.fleet import Fleet
from mrtr_lab.fleet_sim.host import Dedicated, Host
from mrtr_lab.fleet_sim.model import Model
from mrtr_lab.fleet_sim.quiet import BARE_ROW, QuietStep, bare_mix_step
from mrtr_lab.fleet_sim.replay import first_workers, replay
from mrtr_lab.fleet_sim.scrape_cost import ScrapeCost
from mrtr_lab.fleet_sim.strategies import STRATEGIES
from mrtr_lab.fleet_sim.study import Cell, run_cell
from mrtr_lb.balancing import Balance
from mrtr_worker.compute.policy import SheddingSettings

MODEL = Model(
    step_mean=0.05,
    step_cv=0.1,
    long_step_mean=0.05,
    long_step_cv=0.1,
    crowded_step_mean=0.05,
    crowded_long_step_mean=0.05,
    client_first=0.002,
    client_hop=0.001,
    proxy_first=0.0005,
    proxy_hop=0.0005,
    worker_first=0.005,
    worker_hop=0.002,
    worker_step=0.0005,
    start_cpu=2.0,
)
CALLS = 200
HANG_GUARD_SECONDS = 900


def test_a_host_shares_its_cores_among_the_jobs_that_can_run() -> None:
    env = simpy.Environment()
    host = Host(env, cores=2)
    crowd, alone = host.group("crowd"), host.group("alone")
    done: dict[str, float] = {}

    def job(name: str, group: object, work: float) -> simpy.events.ProcessGenerator:
        assert isinstance(group, type(crowd))
        yield group.run(work)
        done[name] = env.now

    for i in range(4):
        env.process(job(f"c{i}", crowd, 1.0))
    env.process(job("a", alone, 1.0))

    def stop_and_resume() -> simpy.events.ProcessGenerator:
        yield env.timeout(0.5)
        alone.set_speed(0.0)  # SIGSTOP: its share goes to the others
        yield env.timeout(1.0)
        alone.set_speed(1.0)

    env.process(stop_and_resume())
    env.run()
    # 5 jobs on 2 cores: 0.4 each until 0.5 s; 4 jobs: 0.5 each until 1.5 s; then 0.4 each again.
    assert done["c0"] == pytest.approx(2.25)
    assert done["a"] == pytest.approx(2.75)


def test_a_process_at_nice_0_takes_a_core_from_the_step_processes_at_nice_10() -> None:
    """CFS weights (1024 against 110): a starting worker or an event loop runs nearly at full speed beside steps."""
    env = simpy.Environment()
    host = Host(env, cores=2)
    loop, steps = host.group("loop"), host.group("steps", nice=10)
    done: dict[str, float] = {}

    def job(name: str, group: object, work: float) -> simpy.events.ProcessGenerator:
        assert isinstance(group, type(loop))
        yield group.run(work)
        done[name] = env.now

    env.process(job("loop", loop, 1.0))
    for i in range(3):
        env.process(job(f"s{i}", steps, 1.0))
    env.run()
    # The nice-0 job is capped at one core; the three steps share the other (1/3 each) until it ends at 1 s,
    # then the two cores (2/3 each): their remaining 2/3 take 1 s more. Shared equally, all four would end at 2 s.
    assert done["loop"] == pytest.approx(1.0)
    assert done["s0"] == pytest.approx(2.0)


def test_the_quiet_step_comes_from_the_bare_pool_of_the_cluster_efficiency_figures(tmp_path: Path) -> None:
    report = tmp_path / "benchmarks.md"
    columns = ["side", "useful steps/s", "in window", "calls", "wasted", "p50 / p99", "hops", "CPU s"]
    row = (BARE_ROW, 87.9, 91.2, "118 (0)", 0, "1.13 / 6.51", "0 / 0", "1.3 / -")
    table = markdown_table(columns, "lrrrrrrr", [row])
    write_section("cluster-efficiency", "\n".join(["steps run in a 15 s window (after a warm-up)", "", *table]), report)
    seconds, source = bare_mix_step(report)
    assert seconds == pytest.approx((2 - 1.3 / 15) / 87.9)
    assert read_figures("cluster-efficiency", report)["measured"] in source
    cal = load(CALIBRATION)
    cal.step_quiet = QuietStep(0.04, seconds, 2.0, source, long_mean=0.05, long_ratio=2.5)
    cal.steps_others_share = 0.5  # step times measured beside other work: the quiet step stands in
    model = Model.from_calibration(cal)
    assert (model.step_mean, model.crowded_step_mean) == (0.04, 0.04)
    assert (model.long_step_mean, model.crowded_long_step_mean) == (0.05, 0.05)


def test_without_the_cluster_efficiency_figures_the_quiet_step_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no figures for 'cluster-efficiency'"):
        bare_mix_step(tmp_path / "benchmarks.md")


def test_step_times_measured_on_a_quiet_machine_are_taken_as_they_are() -> None:
    cal = load(CALIBRATION)
    cal.step_quiet = QuietStep(0.04, 0.02, 2.0, "a report", long_mean=0.05, long_ratio=2.5)
    cal.steps_others_share = 0.01
    model = Model.from_calibration(cal)
    assert (model.step_mean, model.crowded_step_mean) == (cal.step_short.mean, cal.step_crowded.mean)
    assert (model.long_step_mean, model.crowded_long_step_mean) == (cal.step_long.mean, cal.step_long_crowded.mean)
    cal.steps_others_share = None  # not watched (a file from before the watch): as measured under load
    assert Model.from_calibration(cal).step_mean == 0.04


def test_a_why_shed_replay_pays_for_the_benchmarks_scrapes() -> None:
    cal = load(CALIBRATION)
    ref = next(r for r in cal.reference if r.scenario == "a" and r.strategy == "ours" and r.scraped)
    cal.scrape = ScrapeCost(worker=0.02, scraper=0.02)  # dear scrapes, so that the difference shows
    paid = replay(cal, ref, seed=1)
    free = replay(cal, replace(ref, scraped=False), seed=1)
    assert paid.completed < free.completed


def test_a_cell_after_a_healthy_row_counts_neither_its_calls_nor_its_steps() -> None:
    """The straggler benchmark's slow row with shedding on runs on the workers its healthy row just loaded."""
    cal = load(CALIBRATION)
    ref = next(r for r in cal.reference if r.before == [("healthy", 45.0)])
    warm, cold = replay(cal, ref, seed=1), replay(cal, replace(ref, before=[]), seed=1)
    assert abs(warm.lost) < 20  # hand-back loses no step: the healthy row's steps are not this cell's
    assert warm.completed == pytest.approx(cold.completed, rel=0.25)  # its calls are not counted either


def test_a_pause_stretches_the_step_it_meets_on_dedicated_cores() -> None:
    env = simpy.Environment()
    cpu = Dedicated(env, "w1", speed=0.5)
    ended: list[float] = []

    def step() -> simpy.events.ProcessGenerator:
        yield from cpu.compute(1.0)  # 2 s at half speed
        ended.append(env.now)

    def pause() -> simpy.events.ProcessGenerator:
        yield env.timeout(0.5)
        cpu.set_speed(0.0)
        yield env.timeout(1.5)
        cpu.set_speed(0.5)

    env.process(step())
    env.process(pause())
    env.run()
    assert ended == [pytest.approx(3.5)]


def _cell(scenario: str, strategy: str, load: float = 0.9) -> Cell:
    return Cell(scenario, 10, load, STRATEGIES[strategy])


def test_a_seed_gives_the_same_figures_and_another_seed_others() -> None:
    cell = _cell("slow", "hand-back")
    first, again, other = (run_cell(MODEL, cell, CALLS, seed) for seed in (3, 3, 4))
    assert first == again
    assert first.figures != other.figures


def test_hedging_sends_second_calls_and_counts_their_duplicate_work() -> None:
    figures = run_cell(MODEL, _cell("slow", "hedged"), CALLS).figures
    assert figures.hedged > 0
    assert figures.lost_steps > 0  # the losers' steps
    assert figures.rounds == 0  # shedding is off: no hand-back


@pytest.mark.parametrize("strategy", ["stay", "two-choices", "hand-back", "hand-back+two-choices"])
def test_without_hedging_no_step_is_lost_to_a_slow_instance(strategy: str) -> None:
    figures = run_cell(MODEL, _cell("slow", strategy), CALLS).figures
    assert figures.calls >= CALLS * 0.9
    assert figures.lost_steps == 0
    assert (figures.rounds > 0) is STRATEGIES[strategy].shedding  # hand-backs only where shedding is on


def test_an_upgrade_by_drain_loses_nothing_and_reports_its_time() -> None:
    result = run_cell(MODEL, _cell("upgrade", "hand-back"), CALLS)
    assert result.figures.lost_steps == 0
    assert result.event_seconds is not None
    assert result.event_seconds >= 10 * MODEL.start_cpu  # ten batches of one, each a start-up first


def test_a_scale_out_reports_when_the_new_instances_carry_their_share() -> None:
    result = run_cell(MODEL, _cell("scale-out", "hand-back", load=0.95), CALLS)
    assert result.figures.calls >= CALLS
    assert result.event_seconds is not None or result.never


def test_a_slower_step_makes_slower_calls() -> None:
    cell = _cell("slow", "stay", load=0.5)
    quick = run_cell(MODEL, cell, CALLS).figures
    slow = run_cell(replace(MODEL, step_mean=0.1), cell, CALLS).figures
    assert slow.p50 > quick.p50 * 1.5


@pytest.mark.slow
def test_a_tiny_run_prints_the_calibration_and_the_study() -> None:
    """As `scripts/bench fleet-sim` runs it (a subprocess, so marked slow), with the committed calibration."""
    assert load(CALIBRATION).reference, "calibration.json holds the real figures"
    run = subprocess.run(
        [
            *(sys.executable, "-m", "mrtr_lab.fleet_sim", "--no-report", "--no-anchors", "--jobs", "1"),
            *("--sizes", "10", "--loads", "0.9", "--calls", "100", "--seeds", "1"),
            *("--scenarios", "slow,upgrade", "--strategies", "hand-back,stay,hedged"),
        ],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "### Calibration" in output, output
    assert "<!-- fleet-sim-calibration:start -->" in output, "the calibration is its own block (--calibration-only)"
    documented = r"^\| docs/(benchmarks.md|lab/data): why-shed, [^|]+ \| \(a\) one at a quarter speed \| hand-back \|"
    assert re.search(documented, output, re.M), output
    assert re.search(r"^\| slow \| 10 \| 0\.90 \|( [*\d.]+ \|){3}$", output, re.M), output
    assert "written to" not in output


def test_the_calibration_alone_is_written_into_its_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--calibration-only` replays the measured cells and rewrites their block, the study's text untouched; a
    report without the block is refused rather than given a second calibration at its end."""
    from benchmarks.report import block
    from mrtr_lab.fleet_sim import __main__ as fleet_sim

    cal = load(CALIBRATION)
    cal.reference = [ref for ref in cal.reference if ref.scenario == "healthy"][:1]
    calibration = tmp_path / "calibration.json"
    calibration.write_text(json.dumps(asdict(cal)))
    report = tmp_path / "report.md"
    write_section("fleet-sim", "the study's tables", report)
    argv = ["fleet_sim", "--calibration-only", "--calibration", str(calibration), "--report-file", str(report)]
    monkeypatch.setattr(sys, "argv", [*argv, "--seeds", "1"])
    assert fleet_sim.main() == 2
    write_section("fleet-sim", f"the study's tables\n\n{block('fleet-sim-calibration', 'old table')}", report)
    assert fleet_sim.main() == 0
    text = report.read_text()
    assert "old table" not in text
    assert "the study's tables" in text
    assert re.search(r"^\| [^|]+ \| healthy \| hand-back \|", text, re.M), text
    assert text.count("### Calibration") == 1


def test_a_leaving_worker_stays_in_the_proxys_pool_until_the_real_one_would_be_gone() -> None:
    """The round robin's cursor counts the places in the pool: a restart picked before the real proxy dropped the
    worker must be picked from the same pool (`Model.leave_lag`: the benchmark's look, the exit, the re-read)."""
    cal = load(CALIBRATION)
    assert Model.from_calibration(cal).leave_lag == pytest.approx(0.025 + cal.start_up.gone)
    env = simpy.Environment()
    model = replace(MODEL, leave_lag=0.1)
    fleet = Fleet(env, model, SheddingSettings(enabled=False), Balance.ROUND_ROBIN, random.Random(1), shared_cores=2)
    leaving, _ = fleet.add(), fleet.add()
    seen: dict[str, object] = {}

    def leave() -> simpy.events.ProcessGenerator:
        yield env.process(fleet.leave_waiting(leaving, grace=600.0))
        seen["left"] = env.now

    def look() -> simpy.events.ProcessGenerator:
        yield env.timeout(0.05)
        seen["exited"] = not leaving.alive
        seen["listed"] = fleet.proxy.pool.get(leaving.name) is not None

    env.process(leave())
    env.process(look())
    env.run()
    assert seen == {"exited": True, "listed": True, "left": pytest.approx(0.1)}
    assert fleet.proxy.pool.get(leaving.name) is None


def test_a_replay_starts_its_round_robin_where_the_real_proxy_stood() -> None:
    """A real run records its proxy's pool order and next pick (`/lb/backends`); the replay's pool starts the same,
    and where a run recorded neither, each seed draws them."""
    cal = load(CALIBRATION)
    ref = next(r for r in cal.reference if r.scenario == "b" and r.strategy == "stay")

    def start(pool_order: list[int] | None, next_pick: int | None, seed: int) -> tuple[tuple[int, ...], int]:
        settings, rng = SheddingSettings(enabled=False), random.Random(seed)
        fleet = Fleet(simpy.Environment(), MODEL, settings, Balance.ROUND_ROBIN, rng, shared_cores=2)
        workers = first_workers(fleet, replace(ref, pool_order=pool_order, next_pick=next_pick), 3)
        names = [w.name for w in workers]
        upcoming = fleet.proxy.pool.next_pick()
        assert upcoming is not None
        return tuple(names.index(b.url) for b in fleet.proxy.pool), names.index(upcoming.url)

    assert start([2, 0, 1], 2, seed=1) == ((2, 0, 1), 2)
    assert start([2, 0, 1], 1, seed=1) == ((2, 0, 1), 1)
    drawn = {start(None, None, seed) for seed in range(30)}
    assert len({next_pick for _, next_pick in drawn}) == 3
    assert len({order for order, _ in drawn}) > 1
