"""A demand spike over the whole fleet: goodput, the short calls' tail, settling, retries and lost work.

Through the entry point of three workers (and Redis, for the tasks), a steady load at 70 % of the fleet's
capacity (long `count_primes` calls arriving open loop, one in five as a task, `echo` short calls at a
fixed rate), then demand steps to 1.4x capacity for a phase, back to steady, to 3x, and back again
(`--scale` shortens every phase).
The capacity (steps per second with every slot busy) is measured in the same run, before and after
the setups, on the cluster with shedding off (no hand-back spends its steps); the larger counts.
Setups, one after the other in one run, each with the same schedule:

* default: our proxy, the workers' defaults (shedding on: admission hand-backs with a growing retry
  hint, priority after a few hops, time slices);
* shedding off: our proxy, workers that queue every round for a slot and never hand back for load;
* HAProxy limiter: HAProxy with a per-worker connection limit and a queue (the limiter users reach
  for), in front of the default cluster's workers;
* fleet-full rule: the default with `FLEET_FULL_HOLD_MS=1000` (`compute.fleet_load`: a full worker
  that receives a round another full worker refused queues new rounds instead of refusing them);
* busy refusals: the fleet-full rule with `REFUSE_NEW_AFTER_MS=40000` (`mrtr_protocol.busy`: a new call
  that would queue longer than that is refused at once with a retry hint, which the client honours a
  couple of times before it gives up with the refusal).

Figures per setup and phase (definitions in `benchmarks._spike_figures`), a timeline per setup, and
the issue's targets for the default setup. Every answer is checked; a wrong one is lost work.
"""

from __future__ import annotations

import asyncio
import math
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks import _haproxy
from benchmarks._cluster import MIX, PATIENT, clusters, steps_executed
from benchmarks._spike_chart import draw
from benchmarks._spike_figures import PhaseFigures, Sample, p99_by_second, phase_figures
from benchmarks._spike_load import LongCall, LongCallsProcess, Phase, schedule_times, short_calls
from benchmarks._spike_report import report
from benchmarks.report import REPORT, parser, publish
from mrtr_client import AsyncClient
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.local.process import free_port
from mrtr_worker.compute.policy import SheddingSettings

WORKERS = 3
SLOTS = SheddingSettings().max_concurrent
STEADY = 0.7
PHASES = (
    Phase("steady", STEADY, 15.0),
    Phase("spike 1.4x", 1.4, 20.0),
    Phase("after 1.4x", STEADY, 20.0),
    Phase("spike 3x", 3.0, 20.0),
    Phase("after 3x", STEADY, 20.0),
)
SETUPS = ("default", "shedding off", "HAProxy limiter", "fleet-full rule", "busy refusals")
FLEET_FULL_HOLD_MS = 1000
REFUSE_NEW_AFTER_MS = 40_000
"""Two thirds of the long calls' deadline (`_spike_load.DEADLINE_S`): room for the call's own steps after its
wait, slower in a spike (the fleet simulator's spike found fewer refusals and no more timeouts than at 30 s)."""


SETTINGS = {
    "default": SheddingSettings(),
    "shedding off": SheddingSettings(enabled=False),
    "fleet-full rule": SheddingSettings(fleet_full_hold_ms=FLEET_FULL_HOLD_MS),
    "busy refusals": SheddingSettings(fleet_full_hold_ms=FLEET_FULL_HOLD_MS, refuse_new_after_ms=REFUSE_NEW_AFTER_MS),
}
"""The workers' settings of every setup but HAProxy's (which fronts the default workers); the fleet simulator's
spike (`mrtr_lab.spike_sim`) runs the same."""


@dataclass(frozen=True)
class SetupRun:
    name: str
    started: float
    phases: list[Phase]
    figures: list[PhaseFigures]
    samples: list[Sample]
    p99_by_second: list[float]
    records: list[LongCall]


async def measure_capacity(cluster: LocalCluster, seconds: float) -> float:
    """Steps per second with every slot busy: twice as many closed-loop callers as slots, after a warm-up."""
    stop = asyncio.Event()
    async with AsyncClient(cluster.mcp_url, policy=PATIENT) as client:

        async def caller(n: int) -> None:
            while not stop.is_set():
                await client.call_tool("count_primes", MIX[n % len(MIX)].arguments)
                n += 1

        callers = [asyncio.create_task(caller(n)) for n in range(2 * SLOTS * WORKERS)]
        await asyncio.sleep(min(2.0, seconds))
        before, at = await asyncio.to_thread(steps_executed, cluster), time.monotonic()
        await asyncio.sleep(seconds)
        after, end = await asyncio.to_thread(steps_executed, cluster), time.monotonic()
        stop.set()
        await asyncio.gather(*callers)
    return (after - before) / (end - at)


class Sampler:
    """The workers' step counters once a second, in a thread, while a setup runs."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._cluster = cluster
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.samples.append(Sample(time.monotonic(), steps_executed(self._cluster)))
            if self._stop.wait(1.0):
                return


def run_setup(
    name: str, url: str, cluster: LocalCluster, phases: list[Phase], capacity: float, rate: float
) -> SetupRun:
    """The schedule through `url`; the steps are counted on `cluster`'s workers."""
    started = time.monotonic() + 2.0  # the child process starts and imports meanwhile
    seconds = sum(phase.seconds for phase in phases)
    long = LongCallsProcess(url, schedule_times(phases, capacity, started)).start()
    with Sampler(cluster) as sampler:
        short = asyncio.run(short_calls(url, rate, started, seconds))
        records = long.join()  # every long call has ended: completed, refused, or past its deadline
    figures = phase_figures(phases, started, capacity, sampler.samples, short, records)
    p99s = p99_by_second(short, started, math.ceil(seconds))
    return SetupRun(name, started, phases, figures, sampler.samples, p99s, records)


def rerated(run: SetupRun, planned: float, capacity: float) -> SetupRun:
    """`run` measured against `capacity` instead of the `planned` one: its goodput, and the demand it offered."""
    if planned == capacity:
        return run
    ratio = planned / capacity
    phases = [replace(p, demand=p.demand * ratio) for p in run.phases]
    figures = [replace(f, phase=phase, goodput=f.goodput * ratio) for f, phase in zip(run.figures, phases, strict=True)]
    return replace(run, phases=phases, figures=figures)


@contextmanager
def haproxy_in_front(cluster: LocalCluster, maxconn: int, *, install: bool) -> Iterator[str | None]:
    """HAProxy over `cluster`'s workers with a per-worker connection limit; None if it cannot be had."""
    binary, how = _haproxy.ensure_installed(install=install)
    if binary is None:
        print(f"spike: the HAProxy limiter setup is left out: {how}", flush=True)
        yield None
        return
    port = free_port()
    backends = [cluster.workers[i].url for i in cluster.workers]
    work = Path(tempfile.mkdtemp(prefix="mrtr-spike-haproxy-"))
    process = _haproxy.process(binary, port, backends, work, server_maxconn=maxconn).start()
    try:
        process.wait_ready()
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.stop()


def main() -> int:
    options = parser(__doc__, duration=8.0, duration_help="seconds of the capacity measurement")
    options.add_argument("--scale", type=float, default=1.0, help="multiply every phase's length (default 1)")
    options.add_argument("--rate", type=float, default=40.0, help="short calls per second (default 40)")
    options.add_argument("--setups", default=",".join(SETUPS), help=f"comma-separated, of: {', '.join(SETUPS)}")
    options.add_argument("--haproxy-maxconn", type=int, default=2 * SLOTS, help="HAProxy's limit per worker")
    options.add_argument("--no-install", action="store_true", help="do not apt-get install haproxy if missing")
    args = options.parse_args()
    chosen = [name.strip() for name in args.setups.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(SETUPS))
    if unknown:
        options.error(f"unknown setups {unknown}; known: {list(SETUPS)}")
    phases = [Phase(p.name, p.demand, p.seconds * args.scale) for p in PHASES]
    environments = {name: settings.environment() for name, settings in SETTINGS.items()}
    # the capacity is measured with shedding off: hand-backs cost steps, and the figure is the workers' own
    needed = ["default", "shedding off", *(name for name in environments if name in chosen and name != "default")]
    needed = list(dict.fromkeys(needed))
    runs: list[SetupRun] = []
    with clusters(*(environments[name] for name in needed), workers=WORKERS) as started:
        by_setup = dict(zip(needed, started, strict=True))
        default = by_setup["default"]  # HAProxy fronts its workers
        before = asyncio.run(measure_capacity(by_setup["shedding off"], args.duration))
        print(f"spike: capacity {before:.1f} steps/s ({WORKERS} workers x {SLOTS} slots)", flush=True)
        for name in chosen:
            if name != "HAProxy limiter":
                cluster = by_setup[name]
                runs.append(run_setup(name, cluster.mcp_url, cluster, phases, before, args.rate))
                continue
            with haproxy_in_front(default, args.haproxy_maxconn, install=not args.no_install) as url:
                if url is not None:
                    runs.append(run_setup(name, url, default, phases, before, args.rate))
        after = asyncio.run(measure_capacity(by_setup["shedding off"], args.duration))
    # A stall during one measurement would make every goodput look better: the larger of the two is the capacity.
    capacity = max(before, after)
    print(f"spike: capacity {after:.1f} steps/s after the setups; {capacity:.1f} used", flush=True)
    runs = [rerated(run, before, capacity) for run in runs]
    pictures = REPORT.parent if not args.no_report else Path(tempfile.mkdtemp(prefix="mrtr-spike-"))
    for run in runs:
        draw(run, capacity, pictures / f"spike-{run.name.replace(' ', '-').lower()}.png")
    lines = report(runs, (before, after), args.rate, args.haproxy_maxconn)
    publish("spike", lines, write=not args.no_report)
    return 1 if any(f.wrong for run in runs for f in run.figures) else 0  # a wrong answer; the rest are figures


if __name__ == "__main__":
    raise SystemExit(main())
