"""The walkthrough (`scripts/walkthrough`, `python -m mrtr_ops.walkthrough`): the SEP's rolling upgrade under load.

It starts the cluster (local by default, or compose), runs the Locust suite
headless against the proxy, performs the rolling upgrade from version 1 to
version 2 in the middle of the run (key rotation included), and writes
`summary.json`, `summary.md` and `timeline.png` into `--out`. Exit 0 only if
nothing failed, nothing was wrong, nothing was asked twice, and some requests
visited both versions.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from mrtr_ops.fleet import Fleet
from mrtr_ops.loadrun import start_locust, wait_for_traffic
from mrtr_ops.upgrade.rolling import RollingUpgrade, Step, step_record
from mrtr_ops.walkthrough import prometheus_view
from mrtr_ops.walkthrough.report import Inputs, load_events, verdict, write_report

STATE_TTL = 20
"""Seconds: short, so the old key can be retired within the run (a real fleet keeps minutes)."""
WORKER_ENV = {
    "MRTR_WORKER_STATE_TTL_SECONDS": str(STATE_TTL),
    "MRTR_WORKER_MAX_SLICE_MS": "500",
    "MRTR_WORKER_MIN_SLICE_MS": "100",
    "MRTR_WORKER_TASK_SLICE_MS": "250",
}


def run(
    fleet: Fleet,
    url: str,
    out: Path,
    duration: int,
    users: int,
    locust_env: dict[str, str] | None = None,
    prometheus_url: str | None = None,
) -> int:
    """Drive the upgrade under load; `locust_env` carries e.g. the issuer key when the cluster wants tokens;
    with `prometheus_url`, the report adds what that Prometheus saw of the run."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "events.jsonl").unlink(missing_ok=True)
    started = time.time()
    locust = start_locust(url, out, duration, users, locust_env or {})
    steps: list[Step] = []

    def show(step: Step) -> None:
        steps.append(step)
        print(f"  {step.started - started:6.1f} s  {step.name}  ({step.ended - step.started:.1f} s)", flush=True)

    try:
        print(f"walkthrough: load running against {url}; waiting for traffic before upgrading", flush=True)
        wait_for_traffic(out / "events.jsonl", locust, at_least=10, timeout=duration / 3)
        time.sleep(max(0.0, started + duration / 4 - time.time()))  # a quarter of the run on v1 alone, for the picture
        print("walkthrough: rolling upgrade v1 -> v2", flush=True)
        new_key = time.strftime("v2-%Y%m%d-%H%M%S")  # a ring may already hold an earlier run's key
        RollingUpgrade(fleet, state_ttl=STATE_TTL, new_key=new_key, on_step=show).upgrade()
        print("walkthrough: upgrade done; letting the load run to its end", flush=True)
        exit_code = locust.wait(duration + 120)
    finally:
        if locust.poll() is None:
            locust.terminate()
            locust.wait(30)
    (out / "steps.json").write_text(json.dumps([step_record(s) for s in steps], indent=2))
    ended = time.time()
    seen = None if prometheus_url is None else prometheus_view.collect(prometheus_url, started, ended)
    inputs = Inputs(load_events(out / "events.jsonl"), [step_record(s) for s in steps], started, ended, exit_code, seen)
    summary = write_report(inputs, out)
    print((out / "summary.md").read_text())
    problems = verdict(summary)
    print(f"walkthrough: report in {out}/ ({'OK' if not problems else 'PROBLEMS: ' + '; '.join(problems)})")
    return 1 if problems else 0
