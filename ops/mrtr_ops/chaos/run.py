"""`scripts/chaos`: faults under load, every answer checked, and a report of what each fault did.

While the Locust suite drives the cluster, a seeded schedule (`chaos_plan`)
kills a worker with SIGKILL and restarts it, pauses one and resumes it, cuts
one off the network and puts it back, and drains one and starts a
replacement; one fault at a time, each victim drawn among the workers
serving requests at that moment. The report (`chaos_report`) counts
requests, failures within the client's retry budget and wrong answers (both
must be 0), hand-backs, and per fault what the proxy and the clients saw.
Exit 0 only if every fault happened and nothing failed or was wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mrtr_dev_issuer import ISSUER_KEY_VARIABLE, TOKEN_VARIABLE
from mrtr_ops.chaos.fleet import ChaosFleet, LocalChaosFleet, pid_alive
from mrtr_ops.chaos.plan import PlannedFault, choose_victim, plan
from mrtr_ops.chaos.report import RunInputs, write_report
from mrtr_ops.chaos.watch import HandBackMeter, LbView, metric_total
from mrtr_ops.loadrun import RELAXED_P95, start_locust, stop_locust, wait_for_traffic
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.paths import project_root
from mrtr_ops.walkthrough.report import load_events

WORKER_ENV = {"MRTR_WORKER_MAX_SLICE_MS": "500", "MRTR_WORKER_MIN_SLICE_MS": "100"}
"""Short time slices: computations hop often, so a fault always finds some in flight."""
RECOVERY_SECONDS = 60.0
"""Longest wait for a victim to be back in rotation (a restart under load on a busy machine takes a few seconds)."""
TAIL_SECONDS = 10.0
"""Load after the last fault is undone: the fleet seen whole again."""
EXTRA_SECONDS = 120
"""The load runs at least `--duration` seconds, and on until the last fault is undone (plus the tail) on a slow
machine, but never longer than `--duration` + this: Locust's own `--run-time`."""
READY_SECONDS = 90.0
"""A worker start on a machine busy with other work can take tens of seconds; the run waits, it does not fail."""
VICTIM_WAIT_SECONDS = 3.0
"""How long to look for a worker with requests in flight before taking any."""


@dataclass
class FaultRecord:
    """What one fault did, as Unix times; `chaos_report` turns it into a row."""

    kind: str
    victim: str
    planned_at_s: float
    hold_s: float
    backend: str
    in_flight_at_fault: int
    computing_at_fault: int
    started: float = 0.0
    """When the fault began (just before the action: a kill on compose returns once the container is dead)."""
    undone: float | None = None
    recovered: float | None = None
    left_rotation: float | None = None
    lb_errors: dict[str, float] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class ChaosRun:
    """Does the planned faults to a fleet, one at a time, and records each."""

    def __init__(self, fleet: ChaosFleet, lb: LbView, meter: HandBackMeter, seed: int) -> None:
        self._fleet = fleet
        self._lb = lb
        self._meter = meter
        self._rng = random.Random(f"victims-{seed}")

    def fault(self, planned: PlannedFault) -> FaultRecord:
        # Everything that can be done before choosing is done first: the fault follows the choice at once,
        # while the victim's computation is still running (a time slice is half a second).
        errors_before = self._lb.errors()
        self._meter.scrape_now()  # keep what every worker counted so far, whatever happens to the victim
        victim, backend, in_flight, computing = self._victim()
        record = FaultRecord(planned.kind, victim, planned.at_s, planned.hold_s, backend, in_flight, computing)
        action: Callable[[FaultRecord], None] = getattr(self, f"_{planned.kind}")
        try:
            action(record)
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            record.started = record.started or time.time()
        before, after = errors_before[backend], self._lb.errors()[backend]
        record.lb_errors = {kind: after[kind] - before[kind] for kind in after}
        return record

    # --- the faults ----------------------------------------------------------------------------------

    def _kill9(self, record: FaultRecord) -> None:
        fleet, victim = self._fleet, record.victim
        pid = fleet.process_id(victim)
        record.evidence["old_pid"] = pid
        record.started = time.time()
        fleet.kill9(victim)
        record.evidence["old_pid_gone"] = pid is not None and not pid_alive(pid)
        record.left_rotation = self._lb.wait_rotation(record.backend, False, record.hold_s + 5)
        _sleep_until(record.started + record.hold_s)
        record.undone = time.time()
        fleet.restart(victim)
        record.recovered = self._lb.wait_rotation(fleet.backend_url(victim), True, RECOVERY_SECONDS)
        record.evidence["new_pid"] = fleet.process_id(victim)
        record.evidence["served_after_restart"] = self._served(victim)

    def _pause(self, record: FaultRecord) -> None:
        self._hold_out(record, self._fleet.pause, self._fleet.resume)

    def _cut(self, record: FaultRecord) -> None:
        self._hold_out(record, self._fleet.cut, self._fleet.restore, check_ran_on=True)

    def _hold_out(
        self,
        record: FaultRecord,
        do: Callable[[str], None],
        undo: Callable[[str], None],
        *,
        check_ran_on: bool = False,
    ) -> None:
        """A fault the same process survives: do it, see the proxy drop the victim, hold, undo, see it back."""
        fleet, victim = self._fleet, record.victim
        pid = fleet.process_id(victim)
        record.started = time.time()
        do(victim)
        try:
            record.left_rotation = self._lb.wait_rotation(record.backend, False, record.hold_s)
            _sleep_until(record.started + record.hold_s)
            if check_ran_on:
                record.evidence["ran_on"] = pid is not None and pid_alive(pid)
        finally:
            record.undone = time.time()
            undo(victim)
        record.recovered = self._lb.wait_rotation(fleet.backend_url(victim), True, RECOVERY_SECONDS)
        record.evidence.update(pid=pid, same_process=pid is not None and fleet.process_id(victim) == pid)

    def _drain(self, record: FaultRecord) -> None:
        fleet, victim = self._fleet, record.victim
        pid = fleet.process_id(victim)
        version = next(w.version for w in fleet.workers() if w.instance_id == victim)
        record.started = time.time()
        with self._meter.following(victim):
            fleet.drain_worker(victim)
        record.evidence["drain_s"] = round(time.time() - record.started, 2)
        record.evidence["exited"] = pid is not None and not pid_alive(pid)
        replacement = fleet.start_worker(version, {})
        record.recovered = time.time()
        record.evidence["replacement"] = replacement.instance_id

    # --- helpers -------------------------------------------------------------------------------------

    def _victim(self) -> tuple[str, str, int, int]:
        """A busy worker, drawn with the seeded generator: (victim, its backend URL, requests in flight, computations).

        Its computations are read last, just before the choice, so the fault still finds them running.
        """
        deadline = time.monotonic() + VICTIM_WAIT_SECONDS
        while True:
            workers = self._fleet.workers()
            urls = {w.instance_id: self._fleet.backend_url(w.instance_id) for w in workers}
            backends = self._lb.backends()
            in_flight = {w: int(backends.get(url, {}).get("in_flight", 0)) for w, url in urls.items()}
            computing = {w.instance_id: int(metric_total(w, "mrtr_worker_computations") or 0) for w in workers}
            if any(computing.values()) or time.monotonic() > deadline:
                victim = choose_victim(self._rng, list(urls), computing=computing, in_flight=in_flight)
                return victim, urls[victim], in_flight.get(victim, 0), computing.get(victim, 0)
            time.sleep(0.02)

    def _served(self, victim: str) -> float:
        """MCP requests the (restarted) worker has served, once it served any (0 if none within the deadline)."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            worker = next((w for w in self._fleet.workers() if w.instance_id == victim), None)
            served = metric_total(worker, "mrtr_worker_requests_total") if worker is not None else None
            if served:
                return served
            time.sleep(0.1)
        return 0.0


def _sleep_until(moment: float) -> None:
    """The schedule's own pacing (how long a fault lasts), not a stand-in for readiness."""
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)


def run(fleet: ChaosFleet, out: Path, *, duration: int, users: int, seed: int, locust_env: dict[str, str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    stop_file = out / "stop-load"
    for stale in (out / "events.jsonl", stop_file):
        stale.unlink(missing_ok=True)
    faults_planned = plan(seed, duration, tail=TAIL_SECONDS)
    (out / "plan.json").write_text(json.dumps([f.as_json() for f in faults_planned], indent=2) + "\n")
    lb = LbView(fleet.lb_url)
    meter = HandBackMeter(fleet).start()
    started = time.time()
    env = {**RELAXED_P95, **locust_env, "MRTR_LOCUST_STOP_FILE": str(stop_file)}
    locust = start_locust(fleet.lb_url, out, duration + EXTRA_SECONDS, users, env)
    last_fault_by = started + duration + EXTRA_SECONDS - TAIL_SECONDS - RECOVERY_SECONDS
    records: list[FaultRecord] = []
    try:
        print(f"chaos: seed {seed}, {duration} s of load, {len(faults_planned)} faults planned", flush=True)
        wait_for_traffic(out / "events.jsonl", locust, at_least=10, timeout=duration / 3)
        chaos = ChaosRun(fleet, lb, meter, seed)
        for planned in faults_planned:
            _sleep_until(started + planned.at_s)
            if locust.poll() is not None or time.time() > last_fault_by:
                print(f"chaos: no time left for {planned.kind} and the faults after it", flush=True)
                break
            record = chaos.fault(planned)
            records.append(record)
            _show(record, started)
        calm_from = max([started] + [r.recovered or r.undone or r.started for r in records])
        _sleep_until(max(started + duration, calm_from + TAIL_SECONDS))
        stop_locust(stop_file)
        exit_code = locust.wait(EXTRA_SECONDS + 60)
    finally:
        if locust.poll() is None:
            locust.terminate()
            locust.wait(30)
        meter.stop()
        lb.close()
    (out / "faults.json").write_text(json.dumps([r.as_json() for r in records], indent=2) + "\n")
    inputs = RunInputs(
        events=load_events(out / "events.jsonl"),
        faults=[r.as_json() for r in records],
        planned_kinds=[f.kind for f in faults_planned],
        hand_backs_worker=meter.totals(),
        started=started,
        ended=time.time(),
        locust_exit_code=exit_code,
        seed=seed,
    )
    summary = write_report(inputs, out)
    print((out / "summary.md").read_text())
    problems = summary["problems"]
    print(f"chaos: report in {out}/ ({'OK' if not problems else 'PROBLEMS: ' + '; '.join(problems)})")
    return 1 if problems else 0


def _show(record: FaultRecord, started: float) -> None:
    at = record.started - started if record.started else 0.0
    outcome = record.error or ", ".join(f"{k}={v}" for k, v in record.evidence.items())
    print(f"  {at:6.1f} s  {record.kind:<6} {record.victim}  {outcome}", flush=True)


def _compose_locust_env() -> dict[str, str]:
    """Compose requires bearer tokens: Locust mints one per user with the development issuer's key."""
    if os.environ.get(TOKEN_VARIABLE) or os.environ.get(ISSUER_KEY_VARIABLE):
        return {}
    key = project_root() / "secrets" / "issuer-private.pem"
    return {ISSUER_KEY_VARIABLE: str(key)} if key.exists() else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--compose", action="store_true", help="the running compose cluster instead of a local one")
    parser.add_argument(
        "--duration",
        type=int,
        default=90,
        help="seconds of load (default 90, at least 60); on a slow machine the load goes on until the last fault "
        f"is undone, {EXTRA_SECONDS} s more at most",
    )
    parser.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: from the clock)")
    parser.add_argument("--out", type=Path, default=Path("reports/chaos"), help="report directory")
    parser.add_argument("--users", type=int, default=8, help="Locust users (default 8)")
    args = parser.parse_args(argv)
    duration = max(60, args.duration)
    seed = args.seed if args.seed is not None else int(time.time()) % 100_000

    if args.compose:
        from mrtr_ops.compose.chaos import ComposeChaosFleet

        project = os.environ.get("COMPOSE_PROJECT_NAME") or re.sub(r"[^a-z0-9_-]", "", project_root().name.lower())
        url = f"http://127.0.0.1:{os.environ.get('MRTR_PORT', '8080')}"
        fleet = ComposeChaosFleet(project_root(), project, url)
        if not fleet.workers():
            print(f"chaos: no running worker in compose project {project!r}; start it: docker compose up -d --wait")
            return 2
        print(f"chaos: compose project {project}, proxy {url}, {len(fleet.workers())} workers", flush=True)
        return run(fleet, args.out, duration=duration, users=args.users, seed=seed, locust_env=_compose_locust_env())

    work_dir = args.out / "cluster"
    shutil.rmtree(work_dir, ignore_errors=True)  # a fresh fleet and key ring every run
    config = ClusterConfig(
        workers=3, port=0, work_dir=work_dir, worker_env=dict(WORKER_ENV), cables=True, ready_timeout=READY_SECONDS
    )
    with LocalCluster(config) as cluster:
        print(f"chaos: local cluster of 3 workers at {cluster.mcp_url} (each behind a cable)", flush=True)
        return run(LocalChaosFleet(cluster), args.out, duration=duration, users=args.users, seed=seed, locust_env={})
