"""The rolling upgrade on Docker Swarm, done by the swarm's own rolling update, under distributed Locust load.

    python -m mrtr_ops.swarm [--stack NAME] [--port P] [--out DIR] [--rollback] [--keep]   (`__main__.py`)

Deploys the stack (compose.yaml + compose.swarm.yaml: the proxy and three v1
workers), adds the Locust master and workers as services of the same stack
(compose.swarm-loadtest.yaml + tests/e2e/swarm/locust-headless.yaml, the full
suite, headless, bounded), and while they run: `docker service update --image
<v2> <stack>_worker` (one replica at a time, start-first; the replaced task
drains and exits), optionally `docker service rollback`. The report is the
walkthrough's (`summary.json`, `summary.md`, `timeline.png`) from the Locust
workers' per-request events, plus what the swarm said (how each update ended,
how each replaced task exited). Exit 0 only if nothing failed, nothing was
wrong, nothing was asked twice, some requests visited both versions, every
update completed while the load ran, and every replaced task exited 0.
Needs an active swarm (`docker swarm init --advertise-addr 127.0.0.1`) and the
images (`scripts/build-images`); `scripts/swarm-e2e` does both.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker

from mrtr_ops.lb_admin import in_rotation as lb_in_rotation
from mrtr_ops.swarm.stack import POLL_SECONDS, LbUnreachable, SwarmStack, image_id
from mrtr_ops.swarm.tasks import Task, UpdateStatus, replacements
from mrtr_ops.upgrade.rolling import Step, step_record
from mrtr_ops.waiting import wait_until
from mrtr_ops.walkthrough.report import Inputs, load_events, verdict, write_report

CLUSTER_FILES = ("compose.yaml", "compose.swarm.yaml")
LOADTEST_FILES = (*CLUSTER_FILES, "compose.swarm-loadtest.yaml", "tests/e2e/swarm/locust-headless.yaml")
MONITORING_FILES = (*CLUSTER_FILES, "compose.swarm-monitoring.yaml")
"""The cluster with Prometheus and the Redis exporter (docs/swarm.md, docs/monitoring.md)."""

PASS_CAP_SECONDS = 150
"""Room the load's time cap leaves for one rolling pass over three replicas (measured: 45 to 95 s with a
15 s monitor, slower on a busy machine). The load is stopped as soon as the passes are done; the cap
only bounds a run whose update hangs."""
STOP_TIMEOUT = 30
"""Seconds Locust users get to finish their request when the load stops (LOCUST_STOP_TIMEOUT)."""
LOOSE_P95_MS = "120000"
"""The suite's p95 bounds, loosened: on a shared 2-core machine a verdict must not hang on latency."""


@dataclass(frozen=True)
class Options:
    users: int = 8
    locust_workers: int = 2
    warmup: float = 15.0
    """Seconds of load on version 1 alone before the update starts."""
    tail: float = 10.0
    """Seconds of load after the last rolling pass (the settled fleet, for the picture)."""
    rollback: bool = False

    @property
    def run_time(self) -> int:
        """The load's cap (`--run-time`): it normally stops earlier, once the passes and the tail are done."""
        passes = 2 if self.rollback else 1
        return int(self.warmup + passes * PASS_CAP_SECONDS + self.tail)


def images(engine: docker.DockerClient) -> dict[str, str]:
    """The stack's images by ID (a swarm never tries a registry for those): lb, worker v1 and v2, redis,
    loadtest, prometheus."""
    return {
        "MRTR_LB_IMAGE": image_id(engine, "mrtr-lb:latest"),
        "MRTR_REDIS_IMAGE": image_id(engine, "mrtr-redis:latest"),
        "MRTR_WORKER_IMAGE": image_id(engine, "mrtr-worker:v1"),
        "MRTR_WORKER_V2_IMAGE": image_id(engine, "mrtr-worker:v2"),
        "MRTR_LOADTEST_IMAGE": image_id(engine, "mrtr-loadtest:latest"),
        "MRTR_PROMETHEUS_IMAGE": image_id(engine, "mrtr-prometheus:latest"),
    }


def in_rotation(stack: SwarmStack) -> int:
    """How many workers the stack's proxy has in rotation (0 while it does not answer yet)."""
    try:
        return sum(1 for entry in stack.lb_backends() if lb_in_rotation(entry))
    except (LbUnreachable, ValueError):
        return 0


def deploy_cluster(stack: SwarmStack, url: str, timeout: float = 180.0, files: tuple[str, ...] = CLUSTER_FILES) -> None:
    """Deploy the proxy, the workers and Redis (and whatever else `files` add); return once Redis runs and
    every worker is in the rotation."""
    stack.deploy(*files)
    stack.wait_converged("redis", timeout)
    stack.wait_converged("worker", timeout)
    stack.wait_converged("lb", timeout)
    replicas = stack.replicas("worker")
    wait_until(
        lambda: in_rotation(stack) == replicas,
        timeout=timeout,
        interval=POLL_SECONDS,
        what=f"{replicas} workers in the proxy's rotation at {url}",
    )


def _prepare_out(out: Path) -> Path:
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o777)  # the Locust containers write here as their own non-root user
    for stale in [*out.glob("events-*.jsonl"), out / "locust-summary.json", out / "events.jsonl"]:
        stale.unlink(missing_ok=True)
    return out


def _events(out: Path) -> list[dict[str, Any]]:
    events = [event for path in sorted(out.glob("events-*.jsonl")) for event in load_events(path)]
    return sorted(events, key=lambda e: float(e["end"]))


def _count_lines(out: Path) -> int:
    return sum(len(path.read_bytes().splitlines()) for path in out.glob("events-*.jsonl"))


@dataclass
class RollingPass:
    """One rolling pass over the workers (the update, or the rollback) as the swarm reported it."""

    name: str
    rollback: bool
    status: UpdateStatus
    asked: float
    steps: list[Step]

    @property
    def wanted_state(self) -> str:
        return "rollback_completed" if self.rollback else "completed"

    def record(self) -> dict[str, Any]:
        return {
            "state": self.status.state,
            "message": self.status.message,
            "seconds": round((self.status.completed or time.time()) - self.asked, 1),
            "replaced": len(self.steps),
            "old_exit_codes": [s.detail["old_exit_code"] for s in self.steps],
        }


def _rolling_pass(stack: SwarmStack, name: str, old: str, new: str, *, rollback: bool) -> RollingPass:
    asked = stack.rollback("worker") if rollback else stack.update_image("worker", new)
    status = stack.wait_update("worker", asked, timeout=300)
    steps = replacements(stack.tasks("worker"), old, new, asked, name)
    return RollingPass(name, rollback, status, asked, steps)


def swarm_problems(passes: list[RollingPass], master: Task, load_ended: float, replicas: int) -> list[str]:
    """What the swarm reported that breaks the run (empty: every pass went as it should)."""
    problems = []
    for rolling in passes:
        if rolling.status.state != rolling.wanted_state:
            problems.append(f"{rolling.name}: the swarm says {rolling.status.state} ({rolling.status.message})")
        if len(rolling.steps) != replicas:
            problems.append(f"{rolling.name}: {len(rolling.steps)} of {replicas} slots replaced")
        if any(s.detail["old_exit_code"] != 0 for s in rolling.steps):
            problems.append(f"{rolling.name}: a replaced task did not exit 0 after its drain: {rolling.record()}")
        if any(s.ended >= load_ended for s in rolling.steps):
            problems.append(f"{rolling.name}: a slot was replaced after the load had ended")
    if master.exit_code is None:
        problems.append("the Locust master did not finish")
    return problems


def run(stack: SwarmStack, out: Path, new_image: str, options: Options) -> tuple[int, dict[str, Any]]:
    """Locust on the running stack, the rolling update (and rollback) in its middle, the report: (exit, summary)."""
    out = _prepare_out(out)
    old_image = stack.image("worker")
    replicas = stack.replicas("worker")
    stack.env.update(
        {
            "MRTR_LOCUSTFILE": "locustfile.py",
            "MRTR_SWARM_OUT": str(out),
            "MRTR_LOCUST_USERS": str(options.users),
            "MRTR_LOCUST_SPAWN_RATE": str(max(1, options.users // 2)),
            "MRTR_LOCUST_RUN_TIME": f"{options.run_time}s",
            "MRTR_LOCUST_WORKERS": str(options.locust_workers),
            **{
                f"MRTR_LOCUST_P95_{kind}_MS": LOOSE_P95_MS
                for kind in ("SHORT", "COMPUTE", "LOGIN", "ELICITATION", "SAMPLING_ROOTS", "MIXED")
            },
        }
    )
    started = time.time()
    print(f"swarm-walkthrough: Locust ({options.locust_workers} workers, {options.users} users, "
          f"at most {options.run_time} s) as services of stack {stack.name}", flush=True)  # fmt: skip
    stack.deploy(*LOADTEST_FILES)
    wait_until(
        lambda: _count_lines(out) >= 10, timeout=120, interval=POLL_SECONDS, what="the first requests of the load"
    )
    traffic = time.time()
    print(f"  {traffic - started:6.1f} s  load flowing on version 1", flush=True)
    time.sleep(max(0.0, traffic + options.warmup - time.time()))  # v1 alone for a while, for the picture

    passes = []
    plan = [("update v1->v2", old_image, new_image, False)]
    if options.rollback:
        plan.append(("rollback v2->v1", new_image, old_image, True))
    for name, old, new, is_rollback in plan:
        command = "docker service rollback" if is_rollback else "docker service update --image"
        print(f"  {time.time() - started:6.1f} s  {name}: {command}", flush=True)
        rolling = _rolling_pass(stack, name, old, new, rollback=is_rollback)
        passes.append(rolling)
        for step in rolling.steps:
            print(f"  {step.started - started:6.1f} s  {step.name} ({step.ended - step.started:.1f} s, "
                  f"old task exited {step.detail['old_exit_code']})", flush=True)  # fmt: skip
        print(f"  {time.time() - started:6.1f} s  {name}: {rolling.status.state}", flush=True)

    time.sleep(max(0.0, options.tail))  # the settled fleet under load, for the picture
    # SIGTERM: the master stops the run as at its time cap (each user finishes its request within
    # the stop timeout, the workers write their last events), writes its summary and exits with its verdict.
    stack.signal("locust-master", "SIGTERM")
    master = stack.wait_done("locust-master", timeout=60)[0]
    load_ended = master.changed
    stack.wait_done("locust-worker", timeout=STOP_TIMEOUT + 60)
    ended = time.time()
    print(
        f"  {load_ended - started:6.1f} s  load stopped; the Locust master exited with {master.exit_code}", flush=True
    )

    steps = [step_record(s) for rolling in passes for s in rolling.steps]
    summary = write_report(Inputs(_events(out), steps, started, ended, master.exit_code), out)
    master_summary = out / "locust-summary.json"
    summary["swarm"] = {
        "stack": stack.name,
        "replicas": replicas,
        "images": {"v1": old_image, "v2": new_image},
        "passes": {rolling.name: rolling.record() for rolling in passes},
        "final_image": stack.image("worker"),
        "locust_master_requests": (
            json.loads(master_summary.read_text())["requests"] if master_summary.exists() else None
        ),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    problems = verdict(summary) + swarm_problems(passes, master, load_ended, replicas)
    print((out / "summary.md").read_text())
    print(f"swarm-walkthrough: report in {out}/ ({'OK' if not problems else 'PROBLEMS: ' + '; '.join(problems)})")
    return (1 if problems else 0), summary
