"""What happens around a scale-out, every 0.1 s: the tool that found why the new instances were slow to fill.

Runs scenario (c) once and prints, from one second before `add_workers`
returned, per worker and per 0.2 s: steps run, MCP requests in flight,
computations holding a slot, and hand-backs by reason (admission,
pressure, slice, straggler). Admission hand-backs are the rounds that
made a client wait for the retry hint.

    .venv/bin/python -m mrtr_lab._why_shed.timeline [--strategy ours|stay] [--seconds 8]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from benchmarks._cluster import TOOL_PACKS, PrimesCall, stop_cluster
from mrtr_lab._why_shed.accounting import Sample, seconds_to_share
from mrtr_lab._why_shed.fleet import IN_FLIGHT, STEPS, Strategy, add_workers, ensure
from mrtr_lab._why_shed.scenarios import Callers
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.metrics_page import MetricsPage
from mrtr_worker.compute import primes

REASONS = ("admission", "pressure", "slice", "straggler")
COLUMNS = ("steps", "flight", "slots", *REASONS)


@dataclass(frozen=True)
class Reading:
    """One worker's counters at one moment."""

    steps: float
    in_flight: float
    computations: float
    ended: dict[str, float]


@dataclass
class Recorder:
    """Scrapes every worker of `cluster` every `interval` seconds on a thread."""

    cluster: LocalCluster
    interval: float = 0.1
    rows: list[tuple[float, dict[str, Reading]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with httpx.Client(timeout=1.0) as http:
            while not self._stop.wait(self.interval):
                readings = {}
                for name, handle in list(self.cluster.workers.items()):
                    try:
                        page = MetricsPage.parse(http.get(f"{handle.url}/metrics").text)
                    except httpx.HTTPError:
                        continue
                    readings[name] = Reading(
                        page.value(STEPS, tool="count_primes"),
                        page.value(IN_FLIGHT),
                        page.value("mrtr_worker_computations"),
                        page.by_label("mrtr_worker_input_required_total", "reason"),
                    )
                self.rows.append((time.monotonic(), readings))

    def stop(self) -> None:
        self._stop.set()


def table(rows: list[tuple[float, dict[str, Reading]]], added_at: float, step: float, seconds: float) -> list[str]:
    """Per worker and per `step` seconds from one second before `added_at`: deltas of counters, levels of gauges."""
    names = sorted({name for _, readings in rows for name in readings})
    out = ["t s  | " + " | ".join(f"{name[-6:]:>6} " + " ".join(f"{c[:5]:>5}" for c in COLUMNS) for name in names)]
    previous: dict[str, Reading] = {}
    moment = added_at - 1.0
    for at, readings in rows:
        if at < moment:
            previous.update(readings)
            continue
        cells = []
        for name in names:
            now, before = readings.get(name), previous.get(name)
            if now is None:
                cells.append(" " * (7 + 6 * len(COLUMNS)))
                continue
            ran = now.steps - (before.steps if before else 0.0)
            ended = [now.ended.get(r, 0.0) - (before.ended.get(r, 0.0) if before else 0.0) for r in REASONS]
            values = [ran, now.in_flight, now.computations, *ended]
            cells.append(" " * 7 + " ".join(f"{v:5.0f}" for v in values))
        out.append(f"{at - added_at:+5.1f}| " + " | ".join(cells))
        previous.update(readings)
        moment = at + step - 0.05
        if at > added_at + seconds:
            break
    return out


def _share(rows: list[tuple[float, dict[str, Reading]]], added_at: float) -> str:
    """The benchmark's own figure on these finer samples."""
    names = sorted({name for _, readings in rows for name in readings})
    samples = [Sample(at, {name: r.steps for name, r in readings.items()}) for at, readings in rows]
    share = seconds_to_share(samples, names[2:], added_at, fair_share=0.5)
    return "never" if share is None else f"{share:.1f}"


def _totals(rows: list[tuple[float, dict[str, Reading]]], added_at: float) -> dict[str, float]:
    last: dict[str, Reading] = {}
    for at, readings in rows:
        if at <= added_at:
            last.update(readings)
    return {r: sum(reading.ended.get(r, 0.0) for reading in last.values()) for r in REASONS}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--strategy", choices=["ours", "stay"], default="ours")
    p.add_argument("--callers", type=int, default=12)
    p.add_argument("--warmup", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--step", type=float, default=0.2)
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for every worker (repeatable)")
    args = p.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    strategy = Strategy.OURS if args.strategy == "ours" else Strategy.STAY
    work = Path(tempfile.mkdtemp(prefix="mrtr-timeline-"))
    config = ClusterConfig(
        workers=2, port=0, tool_packs=TOOL_PACKS, work_dir=work, worker_env={**strategy.worker_env, **env}, redis=False
    )
    cluster = LocalCluster(config)
    try:
        cluster.start()
        ensure(cluster, 2, strategy)
        recorder = Recorder(cluster)
        thread = threading.Thread(target=recorder.run, daemon=True)
        thread.start()
        call = PrimesCall(100_000_000, primes.DEFAULT_SEGMENT)
        with Callers(cluster.mcp_url, call, args.callers):
            time.sleep(args.warmup)
            asked = time.monotonic()
            add_workers(cluster, 2, strategy)
            added_at = time.monotonic()
            time.sleep(args.seconds + 0.5)
            recorder.stop()
        thread.join()
    finally:
        stop_cluster(cluster)
    shutil.rmtree(work, ignore_errors=True)
    print(f"add_workers took {added_at - asked:.1f} s; t = 0 when it returned; env {env}")
    totals = _totals(recorder.rows, added_at)
    print(f"share after {_share(recorder.rows, added_at)} s; hand-backs before t = 0: {totals}")
    print("\n".join(table(recorder.rows, added_at, args.step, args.seconds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
