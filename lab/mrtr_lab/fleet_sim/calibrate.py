"""Measure the fleet simulator's parameters and reference figures on the real three-worker cluster.

    .venv/bin/python -m mrtr_lab.fleet_sim.calibrate [--repeats N] [--out PATH]
    .venv/bin/python -m mrtr_lab.fleet_sim.calibrate --add-references --cells a:stay --repeats 3
    .venv/bin/python -m mrtr_lab.fleet_sim.calibrate --add-balance --repeats 3

What it measures, each stored in `calibration.json` beside this file (the simulator reads nothing else):

* **step times**: every step of the why-shed calls (`count_primes` of 100,000,000 and of 2,000,000,000 in
  segments of 5,000,000), timed in this process on one core: their mean and spread;
* **hop cost**: CPU per hop of the client (the async client the scenarios use), the proxy and the worker's
  main process, from the same call with a hand-back after every step and without any (two one-slot workers
  behind the proxy, as `hop_cost.py` does), and what a call's first round costs each of them;
* **start-up**: wall time and CPU (the process and its step pool) of a worker from start to in rotation;
* **the kernel's uneven share** (`uneven_share.py`, alone with `--uneven-share`): how far apart the step
  processes of three long calls on the three workers get on the machine's cores over windows of 1.25 to 20 s,
  and the draws of a step pool's weight that spread alike;
* **the polled worker's lift** (`polled_lift.py`, alone with `--polled-lift`): how much more CPU a worker's step
  process gets while the benchmark reads that worker's page every 50 ms, as why-shed waits for a leaving one;
* **the task half's costs** (`task_cost.py`, alone with `--task-cost`): a task's creation and following, a
  slice (take, begin, checkpoint transaction, the pushed change), a step's lease check and a poll, at the
  client, the proxy, the worker and Redis;
* **the reference figures**: the why-shed scenarios (healthy, one instance at a quarter speed, the rolling
  upgrade, the scale-out from 2 to 4) as `lab/mrtr_lab/why_shed.py` runs them, with checkpoint shedding and
  with staying where you land (and kill and start over in the upgrade), every call's latency kept, with the
  share of the CPU other processes took during each cell and the slow instance's measured stopped share.
* **the balance cells** (alone with `--add-balance`): the balance benchmark's cells run as `lab/mrtr_lab/balance.py`
  runs them (a cluster per proxy balance, healthy and one at a quarter speed, round after round), every call
  kept, with where the round robin stood and what each cluster served before the cell.

The machine is shared: the other processes' share is a measured parameter of each cell (the simulator gives
its cluster only the cores left over), never a correction fitted afterwards. Run it at the normal priority,
as the benchmarks run: under `nice` the workers' step processes are reniced from the workers' level (nice 19
against 10 instead of 10 against 0), and the shares among them and the event loops are not the ones the model
takes.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import platform
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks._cluster import TOOL_PACKS, PrimesCall, _children, clusters, stop_cluster
from benchmarks._load import cpu_seconds
from benchmarks.report import REPORT, neighbours, parser
from mrtr_client import AsyncClient, RetryPolicy
from mrtr_lab import balance
from mrtr_lab._balance_order import Slot, history
from mrtr_lab._why_shed.fleet import Steps, Strategy, ensure
from mrtr_lab._why_shed.scenarios import Callers, Cell, Sizes, run
from mrtr_lab.fleet_sim.documented import documented
from mrtr_lab.fleet_sim.polled_lift import PolledLift, polled_lift
from mrtr_lab.fleet_sim.quiet import QuietStep, quiet_step
from mrtr_lab.fleet_sim.reference import Reference
from mrtr_lab.fleet_sim.scrape_cost import ScrapeCost, scrape_cost
from mrtr_lab.fleet_sim.task_cost import Costs, TaskCost, task_cost
from mrtr_lab.fleet_sim.uneven_share import UnevenShare, uneven_share
from mrtr_lab.pages import STUDIES
from mrtr_lab.why_shed import LB_ENV
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_protocol.rounds import HAND_BACK_REASONS
from mrtr_worker.compute import primes
from mrtr_worker.compute.policy import SheddingSettings

CALIBRATION = Path(__file__).resolve().parent / "calibration.json"
PARTS = {
    "quiet_step": "the quiet step",
    "scrape_cost": "a scrape's cost",
    "hop_cost": "the hop cost",
    "uneven_share": "the uneven share",
    "polled_lift": "the polled worker's lift",
    "start_up": "a worker's start-up and stop",
}
"""The parts a flag measures alone, as `Calibration.parts` names them (the task half's costs keep their own time,
`TaskCost.measured_at`; the reference cells read from the report, their sources')."""
PARAMETERS = frozenset(PARTS.values())
"""What `--parameters-only` measures again: their earlier times go."""
ADDED_RUNS = "more runs of why-shed's cells (`--add-references`)"
ADDED_BALANCE = "runs of the balance benchmark's cells (`--add-balance`)"
BALANCE_MEASURED = "measured by calibrate.py: balance"
"""The source of a balance cell `--add-balance` ran, followed by when its run began."""
SHORT = PrimesCall(100_000_000, primes.DEFAULT_SEGMENT)
LONG = PrimesCall(2_000_000_000, primes.DEFAULT_SEGMENT)
HOP_CALL = PrimesCall(10_000_000, 100_000)
"""100 steps of about a millisecond: the hop cost must not drown in step-speed differences (`hop_cost.py`)."""
FEW_STEPS_CALL = PrimesCall(10_000_000, 1_000_000)
"""The same numbers in 10 steps: against `HOP_CALL` without hops, what each step costs the worker's main process."""
SIZES = Sizes(
    duration=30.0,
    short=SHORT,
    long=LONG,
    callers=6,
    overload=12,
    warmup=10.0,
    grace=2.0,
    drain_timeout=600.0,
    upgrade_window=100.0,
    long_callers=3,
)
"""why_shed.py's defaults: the figures in docs/lab/data are of these sizes."""
CELLS = (
    ("healthy", Strategy.OURS),
    ("healthy", Strategy.STAY),
    ("a", Strategy.OURS),
    ("a", Strategy.STAY),
    ("b", Strategy.OURS),
    ("b", Strategy.STAY),
    ("b", Strategy.KILL),
    ("c", Strategy.OURS),
    ("c", Strategy.STAY),
)
PATIENT = RetryPolicy(max_rounds=10_000, max_delivery_failures=16)


@dataclass
class StepTimes:
    """Seconds of one step run alone on one core."""

    mean: float
    cv: float
    """Standard deviation over mean, across steps."""
    samples: int


@dataclass
class HopCost:
    """CPU seconds each process spends on one hand-back and resume, and on a call's first round."""

    client: float
    proxy: float
    worker: float
    first_client: float
    first_proxy: float
    first_worker: float
    """The worker's main process on a call's first round, its steps' dispatch left out (`worker_step`)."""
    worker_step: float
    """The worker's main process per step: handing the state to the step process and taking the result back."""
    wall_per_hop: float
    """Extra wall seconds per hop on an idle cluster (median with hops minus without, per hop)."""


@dataclass
class StartUp:
    wall: float
    """Seconds from starting a worker to it being in the proxy's rotation."""
    cpu: float
    """CPU seconds the worker and its step pool used in that time."""
    gone: float = 0.0
    """Seconds from stopping an idle worker to its being out of the proxy's pool (its exit, the proxy's next read
    of the backends file); 0: not measured."""


@dataclass
class Calibration:
    machine: str
    measured_at: str
    cores: int
    step_short: StepTimes
    """Two processes stepping at once: an instance of the study (two slots on two cores)."""
    step_long: StepTimes
    step_crowded: StepTimes
    """Six at once: the real cluster's three workers, all slots busy, on the machine's cores."""
    step_long_crowded: StepTimes
    """Three at once: the real upgrade's long calls."""
    hop: HopCost
    start_up: StartUp
    sizes: dict[str, Any]
    reference: list[Reference] = field(default_factory=list)
    step_quiet: QuietStep | None = None
    """The short call's step on a quiet machine (`quiet.py`): the model scales every step time to it, so that
    step times measured under load meet reference figures of a quiet machine."""
    scrape: ScrapeCost | None = None
    """What the why-shed benchmark's step-counter scrapes cost (`scrape_cost.py`); None: nothing is paid."""
    tasks: TaskCost | None = None
    """What the task half costs around its steps (`task_cost.py`); None: not measured, no task cell can run."""
    steps_others_share: float | None = None
    """CPU other processes took while the step times were measured (None: not watched, files before it was): on
    a quiet machine the step times are the machine's own and no quiet step is carried over (`Model`)."""
    uneven: UnevenShare | None = None
    """How unevenly the kernel shares the cores among equal step processes (`uneven_share.py`); None: not
    measured, the model shares evenly."""
    polled: PolledLift | None = None
    """How much more CPU a step process gets while its worker's page is read every 50 ms (`polled_lift.py`);
    None: not measured, no lift."""
    parts: dict[str, str] = field(default_factory=dict)
    """What was measured apart from the rest, after `measured_at` (a flag that measures one part, more runs of
    reference cells), and when: the report names each beside `measured_at` (`when_measured`)."""


def when_measured(cal: Calibration) -> str:
    """When the calibration was measured: `measured_at`, then each part measured apart and its time."""
    return "; ".join([cal.measured_at, *(f"{part} {when}" for part, when in cal.parts.items())])


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def step_times(call: PrimesCall, sample: int, concurrency: int) -> StepTimes:
    """CPU seconds of `sample` steps spread over the call's range, in `concurrency` processes stepping at once.

    CPU time, not wall time: waiting for a core is the model's to reproduce (the host's sharing), not part of a
    step's work. But steps run side by side slow each other (shared caches, two hardware threads of one core),
    which CPU time does show: so the processes step at once, as many as the cells run (two on an instance of
    the study, six on the real cluster's three workers)."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(concurrency)
    results = context.Queue()
    processes = [
        context.Process(target=_time_steps, args=(call.arguments, sample, barrier, results), daemon=True)
        for _ in range(concurrency)
    ]
    for process in processes:
        process.start()
    times = [t for _ in processes for t in results.get(timeout=600)]
    for process in processes:
        process.join()
    mean = statistics.fmean(times)
    return StepTimes(mean, statistics.pstdev(times) / mean, len(times))


def _time_steps(arguments: dict[str, Any], sample: int, barrier: Any, results: Any) -> None:
    """One stepping process of `step_times`."""
    state = primes.initial(arguments)
    primes.step(state)  # the base primes, once per process, as in a step process
    total = primes.total_steps(state)
    positions = [2 + (total * i // sample) * state["segment"] for i in range(sample)]
    barrier.wait()
    times = []
    for position in positions:
        started = time.process_time()
        primes.step({**state, "next": position})
        times.append(time.process_time() - started)
    results.put(times)


async def _timed_call(
    client: AsyncClient, cluster: LocalCluster, call: PrimesCall = HOP_CALL
) -> tuple[float, int, float, float, float]:
    """(wall s, hops, client CPU s, proxy CPU s, workers CPU s) of one call."""
    workers = [handle.process.pid for handle in cluster.workers.values()]
    before = time.process_time(), cpu_seconds(cluster.proxy_pid), sum(cpu_seconds(pid) for pid in workers)
    started = time.perf_counter()
    done = await client.call_tool("count_primes", call.arguments)
    wall = time.perf_counter() - started
    if not call.correct(done):
        raise RuntimeError("the hop-cost call gave a wrong answer")
    hops = sum(hop.reason in HAND_BACK_REASONS for hop in done.trace.hops)
    after = time.process_time(), cpu_seconds(cluster.proxy_pid), sum(cpu_seconds(pid) for pid in workers)
    return wall, hops, after[0] - before[0], after[1] - before[1], after[2] - before[2]


def hop_cost(runs: int) -> HopCost:
    """The same call with a hand-back after every step and without any, through the proxy of two workers; and
    without hops in 10 steps instead of 100, which leaves what each step costs the worker's main process."""
    one_slot = SheddingSettings(max_concurrent=1)
    every_step = replace(one_slot, max_slice_ms=1, min_slice_ms=0, priority_after_hops=1_000_000).environment()
    none = replace(one_slot, max_slice_ms=0).environment()

    async def measure(plain: LocalCluster, hopping: LocalCluster) -> tuple[list[Any], list[Any], list[Any]]:
        results: tuple[list[Any], list[Any], list[Any]] = ([], [], [])
        async with (
            AsyncClient(plain.mcp_url, policy=PATIENT) as direct,
            AsyncClient(hopping.mcp_url, policy=PATIENT) as hopper,
        ):
            await _timed_call(direct, plain)  # warm-up: connections, step processes, base primes
            await _timed_call(hopper, hopping)
            for _ in range(runs):  # interleaved, so a busy moment hits all alike
                results[0].append(await _timed_call(direct, plain))
                results[1].append(await _timed_call(hopper, hopping))
                results[2].append(await _timed_call(direct, plain, FEW_STEPS_CALL))
        return results

    with clusters(none, every_step, workers=2) as (plain, hopping):
        without, with_hops, few = asyncio.run(measure(plain, hopping))
    hops = statistics.median(r[1] for r in with_hops)

    def mean(rows: list[Any], index: int) -> float:
        """Trimmed by a fifth at each end: one call that met a stall moved the plain mean of 15 by 20x, and a
        median of CPU times counted in 10 ms ticks is a tick or none."""
        values = sorted(r[index] for r in rows)
        cut = len(values) // 5
        return statistics.fmean(values[cut : len(values) - cut])

    def per_hop(index: int) -> float:
        return float((mean(with_hops, index) - mean(without, index)) / hops)

    step = (mean(without, 4) - mean(few, 4)) / (HOP_CALL.steps - FEW_STEPS_CALL.steps)
    wall = (statistics.median(r[0] for r in with_hops) - statistics.median(r[0] for r in without)) / hops
    return HopCost(
        client=per_hop(2),
        proxy=per_hop(3),
        worker=per_hop(4),
        first_client=mean(few, 2),
        first_proxy=mean(few, 3),
        first_worker=mean(few, 4) - FEW_STEPS_CALL.steps * step,
        worker_step=step,
        wall_per_hop=wall,
    )


def start_up(cluster: LocalCluster, times: int) -> StartUp:
    """Start `times` workers one at a time on an idle cluster; each is stopped again, as why-shed's upgrade stops
    a leaving worker once idle, and timed until the proxy no longer lists it."""
    walls, cpus, gone = [], [], []
    for _ in range(times):
        started = time.monotonic()
        handle = cluster.add_worker()
        walls.append(time.monotonic() - started)
        cpus.append(sum(cpu_seconds(pid) for pid in [handle.process.pid, *_children(handle.process.pid)]))
        cluster.workers.pop(handle.instance_id)
        pool = _children(handle.process.pid)
        stopping = time.monotonic()
        handle.process.stop()
        cluster.forget_worker(handle)  # out of the proxy's discovery (its admin API has no "remove")
        gone.append(time.monotonic() - stopping)
        for pid in pool:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    return StartUp(statistics.median(walls), statistics.median(cpus), statistics.median(gone))


def _healthy(cluster: LocalCluster, strategy: Strategy, sizes: Sizes) -> Cell:
    """Scenario (a) without the slow instance: the baseline the others are read against."""
    ensure(cluster, 3, strategy)
    with Steps(cluster) as steps:
        with Callers(cluster.mcp_url, sizes.short, sizes.callers) as callers:
            time.sleep(sizes.duration)
        executed = steps.executed()
    return Cell("healthy", strategy, callers.load, sizes.short.steps, executed)


def references(
    repeats: int, cells: tuple[tuple[str, Strategy], ...], progress: Path | None = None
) -> tuple[list[Reference], StartUp]:
    """Run every cell `repeats` times; each kept cell is written to `progress` at once (a long run that fails
    late keeps what it measured)."""
    watch = neighbours()
    found: list[Reference] = []
    with _measuring_cluster(3) as cluster:
        ensure(cluster, 3, Strategy.OURS)
        starting = start_up(cluster, 3)
        for repeat in range(repeats):
            for scenario, strategy in cells:
                print(f"[{repeat + 1}/{repeats}] ({scenario}) {strategy.value} ...", flush=True)
                mark = watch.mark() if watch is not None else None
                began = time.monotonic()
                try:
                    if scenario == "healthy":
                        cell = _healthy(cluster, strategy, SIZES)
                    else:
                        cell = run(cluster, scenario, strategy, SIZES)
                except TimeoutError as exc:  # a cell the machine could not finish in time: said, not kept
                    print(f"    not kept: {exc}", flush=True)
                    continue
                share = watch.share_since(mark) if watch is not None and mark is not None else 0.0
                found.append(_reference(cell, share, began))
                print(f"    {_summary(found[-1])}", flush=True)
                if progress is not None:
                    progress.write_text(json.dumps([asdict(ref) for ref in found], indent=1) + "\n")
    return found, starting


@contextmanager
def _measuring_cluster(workers: int) -> Iterator[LocalCluster]:
    """A cluster as why-shed runs it (no Redis, a proxy that waits for long calls) for one measurement:
    stopped afterwards, its work dir removed, or kept and named if the measurement failed."""
    work = Path(tempfile.mkdtemp(prefix="mrtr-calibrate-"))
    config = ClusterConfig(
        workers=workers, port=0, tool_packs=TOOL_PACKS, work_dir=work, redis=False, ready_timeout=300, lb_env=LB_ENV
    )
    cluster = LocalCluster(config)
    try:
        cluster.start()
        yield cluster
    except BaseException:
        print(f"logs kept in {work}")
        raise
    finally:
        stop_cluster(cluster)
    shutil.rmtree(work, ignore_errors=True)


def _reference(cell: Cell, others_share: float, began: float) -> Reference:
    calls = [(call.started - began, call.seconds) for call in cell.load.calls if call.correct]
    return Reference(
        scenario=cell.scenario,
        strategy=cell.strategy.name.lower(),
        calls=calls,
        completed=cell.load.completed,
        errors=len(cell.load.errors) + cell.load.wrong,
        lost=cell.lost,
        others_share=others_share,
        upgrade_seconds=cell.upgrade_seconds,
        leaving_seconds=cell.leaving_seconds,
        share_seconds=cell.share_seconds,
        stopped_share=cell.stopped_share,
        pool_order=list(cell.round_robin.order) if cell.round_robin else None,
        next_pick=cell.round_robin.next if cell.round_robin else None,
    )


def _summary(ref: Reference) -> str:
    seconds = sorted(s for _, s in ref.calls)
    p99 = seconds[min(len(seconds) - 1, int(0.99 * (len(seconds) - 1) + 0.5))] if seconds else float("nan")
    return f"{ref.completed} calls, p99 ~{p99:.1f} s, lost {ref.lost:.0f}, others {ref.others_share:.0%}"


def load(path: Path = CALIBRATION) -> Calibration:
    """The stored calibration, as the simulator reads it."""
    raw = json.loads(path.read_text())
    return Calibration(
        machine=raw["machine"],
        measured_at=raw["measured_at"],
        cores=raw["cores"],
        step_short=StepTimes(**raw["step_short"]),
        step_long=StepTimes(**raw["step_long"]),
        step_crowded=StepTimes(**raw.get("step_crowded", raw["step_short"])),
        step_long_crowded=StepTimes(**raw.get("step_long_crowded", raw["step_long"])),
        hop=HopCost(**{"worker_step": 0.0, **raw["hop"]}),
        start_up=StartUp(**raw["start_up"]),
        sizes=raw["sizes"],
        reference=[_reference_of(ref) for ref in raw.get("reference", [])],
        step_quiet=QuietStep(**raw["step_quiet"]) if raw.get("step_quiet") else None,
        scrape=ScrapeCost(**raw["scrape"]) if raw.get("scrape") else None,
        tasks=_task_cost(raw["tasks"]) if raw.get("tasks") else None,
        steps_others_share=raw.get("steps_others_share"),
        uneven=UnevenShare(**raw["uneven"]) if raw.get("uneven") else None,
        polled=PolledLift(**raw["polled"]) if raw.get("polled") else None,
        parts=raw.get("parts", {}),
    )


def _reference_of(raw: dict[str, Any]) -> Reference:
    """A stored reference cell; files before `Reference.before` said `warmed_by` (seconds of healthy load)."""
    fields = {key: value for key, value in raw.items() if key != "warmed_by"}
    warmed = raw.get("warmed_by")
    before = raw.get("before", [["healthy", warmed]] if warmed else [])
    return Reference(
        **{**fields, "calls": [tuple(call) for call in raw["calls"]], "before": [tuple(part) for part in before]}
    )


def _task_cost(raw: dict[str, Any]) -> TaskCost:
    return TaskCost(
        task=Costs(**raw["task"]),
        slice=Costs(**raw["slice"]),
        step=Costs(**raw["step"]),
        poll=Costs(**raw["poll"]),
        checkpoint_wall=raw["checkpoint_wall"],
        load_average=raw["load_average"],
        measured_at=raw.get("measured_at", ""),
    )


def _documented() -> list[Reference]:
    return documented(STUDIES)


def _sizes() -> dict[str, Any]:
    return {
        "duration": SIZES.duration,
        "callers": SIZES.callers,
        "long_callers": SIZES.long_callers,
        "overload": SIZES.overload,
        "warmup": SIZES.warmup,
        "grace": SIZES.grace,
        "upgrade_window": SIZES.upgrade_window,
        "short_steps": SHORT.steps,
        "long_steps": LONG.steps,
    }


_NOTHING = StepTimes(0.0, 0.0, 0)
_NONE = (_NOTHING, _NOTHING, _NOTHING, _NOTHING, HopCost(0, 0, 0, 0, 0, 0, 0, 0), StartUp(0.0, 0.0))


def _all_step_times() -> tuple[tuple[StepTimes, StepTimes, StepTimes, StepTimes], float | None]:
    """The four step times, and the share of the CPU other processes took meanwhile (None: not watched)."""
    watch = neighbours()
    mark = watch.mark() if watch is not None else None
    found = step_times(SHORT, 20, 2), step_times(LONG, 20, 2), step_times(SHORT, 20, 6), step_times(LONG, 20, 3)
    others = watch.share_since(mark) if watch is not None and mark is not None else None
    for name, times in zip(("short", "long", "short, six at once", "long, three at once"), found, strict=True):
        print(f"    {name}: {times.mean * 1000:.1f} ms (cv {times.cv:.2f})", flush=True)
    print(f"    others took {'?' if others is None else f'{others:.0%}'} of the CPU meanwhile", flush=True)
    return found, others


def _uneven_share() -> UnevenShare:
    print("uneven share ...", flush=True)
    with _measuring_cluster(3) as cluster:
        found = uneven_share(cluster, LONG)
    windows = ", ".join(f"{window} s {spread:.3f}" for window, spread in found.measured.items())
    print(f"    spread across {found.processes} by window: {windows}", flush=True)
    print(f"    the model's draws: spread {found.spread:.3f} every {found.period:g} s", flush=True)
    return found


def _polled_lift() -> PolledLift:
    print("polled worker's lift ...", flush=True)
    with _measuring_cluster(3) as cluster:
        found = polled_lift(cluster, LONG)
    trials = ", ".join(f"{lift:+.1%}" for lift in found.trials)
    print(f"    lift {found.lift:+.1%} (trials of {found.seconds:g} s: {trials})", flush=True)
    return found


def _start_up() -> StartUp:
    """`start_up` on a cluster of its own (one worker, idle)."""
    with _measuring_cluster(1) as cluster:
        return start_up(cluster, 3)


def _parameters_only(path: Path, hop_runs: int, with_docs: bool) -> int:
    """Step times, hop cost and start-up measured again; the reference cells of `path` kept as they are (and
    with `with_docs`, those of docs/lab/data replaced by the figures there now)."""
    kept = load(path) if path.exists() else Calibration("", "", os.cpu_count() or 1, *_NONE, {}, [])
    kept.machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    kept.sizes = kept.sizes or _sizes()
    if with_docs:
        kept.reference = _documented() + [r for r in kept.reference if not r.source.startswith("docs/")]
    print("step times ...", flush=True)
    (kept.step_short, kept.step_long, kept.step_crowded, kept.step_long_crowded), kept.steps_others_share = (
        _all_step_times()
    )
    print("hop cost ...", flush=True)
    kept.step_quiet = quiet_step(SHORT, LONG, REPORT)
    kept.scrape = scrape_cost()
    kept.uneven = _uneven_share()
    kept.polled = _polled_lift()
    kept.hop = hop_cost(hop_runs)
    print(f"    {kept.hop}", flush=True)
    kept.start_up = _start_up()
    kept.measured_at = f"{_now()} (the parameters)"
    kept.parts = {part: when for part, when in kept.parts.items() if part not in PARAMETERS}
    path.write_text(json.dumps(asdict(kept), indent=1) + "\n")
    print(f"written to {path}")
    return 0


def _add_references(path: Path, repeats: int, cells: tuple[tuple[str, Strategy], ...]) -> int:
    """More real runs of some cells beside those kept: one real run of a cell is a noisy reference."""
    kept = load(path)
    began = _now()
    found, _ = references(repeats, cells, path.with_suffix(".partial.json"))
    return _keep_added(path, kept, found, ADDED_RUNS, began)


def _keep_added(path: Path, kept: Calibration, found: list[Reference], part: str, began: str) -> int:
    """`found` beside the reference cells kept, `part` stamped with when they ran, all written to `path`."""
    kept.reference = [*kept.reference, *found]
    runs = f"{began} to {_now()[11:]}"
    kept.parts[part] = f"{kept.parts[part]}, {runs}" if part in kept.parts else runs
    path.write_text(json.dumps(asdict(kept), indent=1) + "\n")
    print(f"{len(found)} reference cells added to {path}")
    return 1 if any(ref.errors for ref in found) else 0


def balance_references(
    measured: list[tuple[Slot, Cell]], others_share: float, source: str, duration: float
) -> list[Reference]:
    """One balance run's cells, in the order `balance.measure` ran them, as reference cells: rounds of one run
    (`source`), each after what its cluster served before it."""
    order = [slot for slot, _ in measured]
    found = []
    for index, (slot, cell) in enumerate(measured):
        first = min((call.started for call in cell.load.calls), default=0.0)
        found.append(
            replace(
                _reference(cell, others_share, first),
                source=source,
                duration=duration,
                before=history(order, index, duration),
                balance=slot.balance,
                run=source,
            )
        )
    return found


def _add_balance(path: Path, rounds: int) -> int:
    """The balance benchmark's cells, `rounds` rounds run as balance.py runs them, added to the reference cells
    in `path`: each with its calls, where the round robin stood and what its cluster served before it."""
    kept = load(path)
    began = _now()
    sizes = balance.sizes_of()
    balances, scenarios = list(balance.BALANCES), list(balance.SCENARIOS)
    watch = neighbours()
    mark = watch.mark() if watch is not None else None
    work = Path(tempfile.mkdtemp(prefix="mrtr-calibrate-balance-"))
    measured = balance.measure(balances, scenarios, sizes, rounds, work)
    shutil.rmtree(work, ignore_errors=True)
    share = watch.share_since(mark) if watch is not None and mark is not None else 0.0
    found = balance_references(measured, share, f"{BALANCE_MEASURED}, {began}", sizes.duration)
    for (slot, _), ref in zip(measured, found, strict=True):
        print(f"    {slot.scenario}, {slot.balance}, round {slot.round + 1}: {_summary(ref)}", flush=True)
    return _keep_added(path, kept, found, ADDED_BALANCE, began)


def main() -> int:
    p = parser(__doc__, duration=SIZES.duration, duration_help="unused: the scenarios keep why_shed.py's sizes")
    p.add_argument("--repeats", type=int, default=1, help="runs of every reference cell (default 1)")
    p.add_argument("--hop-runs", type=int, default=15, help="calls per schedule for the hop cost (default 15)")
    p.add_argument("--cells", default="", help="only these cells, e.g. 'a:ours,b:stay' (default all)")
    p.add_argument("--out", type=Path, default=CALIBRATION, help=f"where to write (default {CALIBRATION})")
    p.add_argument(
        "--with-docs",
        action="store_true",
        help="add the why-shed and straggler figures of docs/lab/data (a quiet machine's) as reference cells",
    )
    p.add_argument(
        "--parameters-only",
        action="store_true",
        help="measure the model's parameters again and keep the reference figures already in --out",
    )
    p.add_argument(
        "--add-references",
        action="store_true",
        help="run the --cells --repeats times and add them to the reference cells in --out (parameters kept)",
    )
    p.add_argument(
        "--add-balance",
        action="store_true",
        help="run the balance benchmark's cells, --repeats rounds, and add them to the reference cells in --out",
    )
    p.add_argument(
        "--quiet-step",
        action="store_true",
        help="only the quiet step (`quiet.py`: the report's bare pool times a ratio measured now) into --out",
    )
    p.add_argument("--hop-cost", action="store_true", help="only the hop cost (`hop_cost`) into --out")
    p.add_argument("--start-up", action="store_true", help="only a worker's start-up and stop (`start_up`) into --out")
    p.add_argument(
        "--uneven-share",
        action="store_true",
        help="only how unevenly the cores are shared among step processes (`uneven_share.py`) into --out",
    )
    p.add_argument(
        "--polled-lift",
        action="store_true",
        help="only a polled worker's lift (`polled_lift.py`: its page read every 50 ms) into --out",
    )
    p.add_argument(
        "--scrape-cost", action="store_true", help="only what a step-counter scrape costs (`scrape_cost.py`) into --out"
    )
    p.add_argument(
        "--task-cost",
        action="store_true",
        help="only the task half's costs (`task_cost.py`: creation, slice, step, poll) into --out",
    )
    p.add_argument("--task-runs", type=int, default=10, help="tasks of each kind for --task-cost (default 10)")
    p.add_argument(
        "--docs-only",
        action="store_true",
        help="only the reference cells read from docs/lab/data, replaced by the figures there now, into --out",
    )
    args = p.parse_args()
    alone = (
        "quiet_step",
        "scrape_cost",
        "task_cost",
        "docs_only",
        "hop_cost",
        "uneven_share",
        "polled_lift",
        "start_up",
    )
    if any(getattr(args, name) for name in alone):
        kept = load(args.out)
        if args.docs_only:
            kept.reference = _documented() + [r for r in kept.reference if not r.source.startswith("docs/")]
            print(f"reference cells: {len(kept.reference)}")
        if args.task_cost:
            kept.tasks = task_cost(args.task_runs)
            print(f"tasks: {kept.tasks}")
        if args.quiet_step:
            kept.step_quiet = quiet_step(SHORT, LONG, REPORT)
            print(f"quiet step: {kept.step_quiet}")
        if args.hop_cost:
            kept.hop = hop_cost(args.hop_runs)
            print(f"hop: {kept.hop}")
        if args.scrape_cost:
            kept.scrape = scrape_cost()
            print(f"scrape: {kept.scrape}")
        if args.uneven_share:
            kept.uneven = _uneven_share()
        if args.polled_lift:
            kept.polled = _polled_lift()
        if args.start_up:
            kept.start_up = _start_up()
            print(f"start-up: {kept.start_up}")
        kept.parts.update({PARTS[name]: _now() for name in alone if getattr(args, name) and name in PARTS})
        args.out.write_text(json.dumps(asdict(kept), indent=1) + "\n")
        return 0
    chosen: tuple[tuple[str, Strategy], ...] = CELLS
    if args.cells:
        wanted = {tuple(item.split(":")) for item in args.cells.split(",")}
        chosen = tuple((s, strategy) for s, strategy in CELLS if (s, strategy.name.lower()) in wanted)
    if args.parameters_only:
        return _parameters_only(args.out, args.hop_runs, args.with_docs)
    if args.add_references:
        return _add_references(args.out, args.repeats, chosen)
    if args.add_balance:
        return _add_balance(args.out, args.repeats)
    print("step times ...", flush=True)
    (short, long, crowded, long_crowded), others = _all_step_times()
    print("hop cost ...", flush=True)
    hop = hop_cost(args.hop_runs)
    print(f"    {hop}", flush=True)
    found, starting = references(args.repeats, chosen, args.out.with_suffix(".partial.json"))
    found += _documented() if args.with_docs else []
    print(f"start-up: {starting}")
    result = Calibration(
        machine=f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        measured_at=_now(),
        cores=os.cpu_count() or 1,
        step_short=short,
        step_long=long,
        step_crowded=crowded,
        step_long_crowded=long_crowded,
        hop=hop,
        start_up=starting,
        sizes=_sizes(),
        reference=found,
        step_quiet=quiet_step(SHORT, LONG, REPORT),
        scrape=scrape_cost(),
        tasks=task_cost(args.task_runs),
        steps_others_share=others,
        uneven=_uneven_share(),
        polled=_polled_lift(),
    )
    args.out.write_text(json.dumps(asdict(result), indent=1) + "\n")
    print(f"written to {args.out}")
    return 1 if any(ref.errors for ref in found) else 0


if __name__ == "__main__":
    raise SystemExit(main())
