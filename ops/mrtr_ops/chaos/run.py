"""The chaos run (`scripts/chaos`, `python -m mrtr_ops.chaos`): faults under load, every answer checked, and a report.

While the Locust suite drives the cluster, a seeded schedule (`plan.py`)
kills a worker with SIGKILL and restarts it, pauses one and resumes it, cuts
one off the network and puts it back, drains one and starts a replacement,
and restarts Redis (the task store) under the tasks in flight; one fault at
a time, each victim drawn among the workers serving requests at that moment. The report (`report.py`) counts
requests, failures within the client's retry budget and wrong answers (both
must be 0), hand-backs, and per fault what the proxy and the clients saw.
Exit 0 only if every fault happened and nothing failed or was wrong.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import httpx

from mrtr_ops.chaos.fleet import ChaosFleet, pid_alive
from mrtr_ops.chaos.plan import FLEET_WIDE, PlannedFault, choose_victim, plan
from mrtr_ops.chaos.report import RunInputs, write_report
from mrtr_ops.chaos.watch import HandBackMeter, lb_errors, metric_total
from mrtr_ops.fleet import FleetWorker
from mrtr_ops.lb_admin import LbAdmin
from mrtr_ops.loadrun import RELAXED_P95, start_locust, stop_locust, wait_for_traffic
from mrtr_ops.waiting import wait_until
from mrtr_ops.walkthrough.report import load_events

WORKER_ENV = {
    "MRTR_WORKER_MAX_SLICE_MS": "500",
    "MRTR_WORKER_MIN_SLICE_MS": "100",
    "MRTR_WORKER_TASK_SLICE_MS": "250",
}
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
STORE = "store"
"""The victim named in a fleet-wide fault's record: the task store."""
VICTIM_WAIT_SECONDS = 3.0
"""How long to look for a worker with requests in flight before taking any."""


@dataclass
class FaultRecord:
    """What one fault did, as Unix times; `report.fault_figures` turns it into a row."""

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


@dataclass(frozen=True)
class FleetLook:
    """The workers at one moment: the proxy's URL of each, its requests in flight and its computations."""

    urls: dict[str, str]
    in_flight: dict[str, int]
    computing: dict[str, int]


class ChaosRun:
    """Does the planned faults to a fleet, one at a time, and records each."""

    def __init__(self, fleet: ChaosFleet, lb: LbAdmin, meter: HandBackMeter, seed: int) -> None:
        self._fleet = fleet
        self._lb = lb
        self._meter = meter
        self._rng = random.Random(f"victims-{seed}")

    def fault(self, planned: PlannedFault) -> FaultRecord:
        # Everything that can be done before choosing is done first: the fault follows the choice at once,
        # while the victim's computation is still running (a time slice is half a second).
        action = self.FAULTS[planned.kind]
        errors_before = lb_errors(self._lb)
        self._meter.scrape_now()  # keep what every worker counted so far, whatever happens to the victim
        victim, backend, in_flight, computing = self._fleet_wide() if planned.kind in FLEET_WIDE else self._victim()
        record = FaultRecord(planned.kind, victim, planned.at_s, planned.hold_s, backend, in_flight, computing)
        try:
            action(self, record)
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            record.started = record.started or time.time()
        before, after = errors_before[backend], lb_errors(self._lb)[backend]
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
        record.left_rotation = self._wait_rotation(record.backend, False, record.hold_s + 5)
        _sleep_until(record.started + record.hold_s)
        record.undone = time.time()
        fleet.restart(victim)
        record.recovered = self._wait_rotation(fleet.backend_url(victim), True, RECOVERY_SECONDS)
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
            record.left_rotation = self._wait_rotation(record.backend, False, record.hold_s)
            _sleep_until(record.started + record.hold_s)
            if check_ran_on:
                record.evidence["ran_on"] = pid is not None and pid_alive(pid)
        finally:
            record.undone = time.time()
            undo(victim)
        record.recovered = self._wait_rotation(fleet.backend_url(victim), True, RECOVERY_SECONDS)
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

    def _redis(self, record: FaultRecord) -> None:
        """Restart the task store under load: tasks in flight go on from their checkpoints, nothing else notices."""
        fleet = self._fleet
        pid = fleet.store_pid()
        record.evidence["old_pid"] = pid
        record.started = time.time()
        fleet.restart_store()
        record.undone = time.time()
        record.evidence["down_s"] = round(record.undone - record.started, 2)
        record.evidence["new_pid"] = fleet.store_pid()
        record.evidence["old_pid_gone"] = pid is not None and not pid_alive(pid)
        record.recovered = self._wait_store_seen(RECOVERY_SECONDS)

    FAULTS: ClassVar[dict[str, Callable[[ChaosRun, FaultRecord], None]]] = {
        "kill9": _kill9,
        "pause": _pause,
        "cut": _cut,
        "drain": _drain,
        "redis": _redis,
    }
    """Every fault kind of the schedule (`plan.KINDS`) and what does it."""

    # --- helpers -------------------------------------------------------------------------------------

    def _victim(self) -> tuple[str, str, int, int]:
        """A busy worker, drawn with the seeded generator: (victim, its backend URL, requests in flight, computations).

        Its computations are read last, just before the choice, so the fault still finds them running.
        """
        looks: list[FleetLook] = []

        def busy() -> bool:
            looks.append(self._look())
            return any(looks[-1].computing.values())

        with suppress(TimeoutError):  # none busy: take any
            wait_until(busy, timeout=VICTIM_WAIT_SECONDS, interval=0.02, what="a worker with a computation")
        look = looks[-1]
        victim = choose_victim(self._rng, list(look.urls), computing=look.computing, in_flight=look.in_flight)
        return victim, look.urls[victim], look.in_flight.get(victim, 0), look.computing.get(victim, 0)

    def _fleet_wide(self) -> tuple[str, str, int, int]:
        """A fault without a victim worker: the fleet's requests in flight and computations at that moment."""
        look = self._look()
        return STORE, "", sum(look.in_flight.values()), sum(look.computing.values())

    def _wait_store_seen(self, timeout: float) -> float | None:
        """Until every worker's /readyz reports the task store reachable again; when, None if not within `timeout`."""

        def seen() -> bool:
            return all(_store_state(worker) == "ok" for worker in self._fleet.workers())

        try:
            wait_until(seen, timeout=timeout, interval=0.1, what="every worker to reach the task store again")
        except TimeoutError:
            return None
        return time.time()

    def _look(self) -> FleetLook:
        workers = self._fleet.workers()
        urls = {w.instance_id: self._fleet.backend_url(w.instance_id) for w in workers}
        backends = self._lb.by_url()
        in_flight = {w: int(backends.get(url, {}).get("in_flight", 0)) for w, url in urls.items()}
        computing = {w.instance_id: int(metric_total(w, "mrtr_worker_computations") or 0) for w in workers}
        return FleetLook(urls, in_flight, computing)

    def _wait_rotation(self, url: str, present: bool, timeout: float) -> float | None:
        """Until the backend is (or is no longer) in rotation; when it was seen so, None if not within `timeout`."""
        try:
            self._lb.wait_for_backend(url, in_rotation=present, timeout=timeout)
        except TimeoutError:
            return None
        return time.time()

    def _served(self, victim: str) -> float:
        """MCP requests the (restarted) worker has served, once it served any (0 if none within the deadline)."""

        def served() -> float | None:
            worker = next((w for w in self._fleet.workers() if w.instance_id == victim), None)
            return metric_total(worker, "mrtr_worker_requests_total") if worker is not None else None

        try:
            return wait_until(served, timeout=20, interval=0.1, what=f"{victim} to serve a request") or 0.0
        except TimeoutError:
            return 0.0


def _store_state(worker: FleetWorker) -> str | None:
    """What a worker's /readyz says of the task store ("ok", "unreachable"; None if it did not answer)."""
    try:
        body = httpx.get(f"{worker.admin_url}/readyz", timeout=2.0).json()
    except (httpx.HTTPError, ValueError):
        return None
    store = body.get("tasks", {}).get("store") if isinstance(body, dict) else None
    return str(store) if store is not None else None


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
    lb = fleet.lb
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
