"""`scripts/walkthrough`: the SEP's rolling-upgrade scenario under load, measured and drawn.

It starts the cluster (local by default, or compose), runs the Locust suite
headless against the proxy, performs the rolling upgrade from version 1 to
version 2 in the middle of the run (key rotation included), and writes
`summary.json`, `summary.md` and `timeline.png` into `--out`. Exit 0 only if
nothing failed, nothing was wrong, nothing was asked twice, and some requests
visited both versions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from mrtr_dev_issuer import ISSUER_KEY_VARIABLE
from mrtr_ops.compose.fleet import ComposeFleet, update_env_file
from mrtr_ops.fleet import Fleet, LocalFleet
from mrtr_ops.loadrun import start_locust, wait_for_traffic
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.paths import project_root
from mrtr_ops.upgrade.rolling import RollingUpgrade, Step, step_record
from mrtr_ops.walkthrough.report import Inputs, load_events, verdict, write_report

STATE_TTL = 20
"""Seconds: short, so the old key can be retired within the run (a real fleet keeps minutes)."""
WORKER_ENV = {
    "MRTR_WORKER_STATE_TTL_SECONDS": str(STATE_TTL),
    "MRTR_WORKER_MAX_SLICE_MS": "500",
    "MRTR_WORKER_MIN_SLICE_MS": "100",
}


def run(fleet: Fleet, url: str, out: Path, duration: int, users: int, locust_env: dict[str, str] | None = None) -> int:
    """Drive the upgrade under load; `locust_env` carries e.g. the issuer key when the cluster wants tokens."""
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
    inputs = Inputs(load_events(out / "events.jsonl"), [step_record(s) for s in steps], started, time.time(), exit_code)
    summary = write_report(inputs, out)
    print((out / "summary.md").read_text())
    problems = verdict(summary)
    print(f"walkthrough: report in {out}/ ({'OK' if not problems else 'PROBLEMS: ' + '; '.join(problems)})")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/walkthrough", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=120, help="seconds of load (default 120; at least 60)")
    parser.add_argument("--out", type=Path, default=Path("reports/walkthrough"), help="report directory")
    parser.add_argument("--compose", action="store_true", help="use the compose cluster instead of the local one")
    parser.add_argument("--users", type=int, default=8, help="Locust users (default 8)")
    args = parser.parse_args(argv)
    duration = max(60, args.duration)

    if args.compose:
        project = os.environ.get("COMPOSE_PROJECT_NAME") or re.sub(r"[^a-z0-9_-]", "", project_root().name.lower())
        env = {**os.environ, "MRTR_STATE_TTL_SECONDS": str(STATE_TTL), "MRTR_MAX_SLICE_MS": "500"}
        subprocess.run(["docker", "compose", "down"], cwd=project_root(), env=env, check=True)
        update_env_file(project_root() / ".env", {"MRTR_WORKERS": "3", "MRTR_V2_WORKERS": "0"})  # start from v1 again
        subprocess.run(["docker", "compose", "up", "-d", "--wait"], cwd=project_root(), env=env, check=True)
        url = f"http://127.0.0.1:{os.environ.get('MRTR_PORT', '8080')}"
        tokens = {
            ISSUER_KEY_VARIABLE: str(project_root() / "secrets" / "issuer-private.pem")
        }  # compose wants bearer tokens
        return run(ComposeFleet(project_root(), project, url), url, args.out, duration, args.users, tokens)

    work_dir = args.out / "cluster"
    shutil.rmtree(work_dir, ignore_errors=True)  # a fresh fleet and key ring every run
    config = ClusterConfig(workers=3, port=0, work_dir=work_dir, worker_env=dict(WORKER_ENV))
    with LocalCluster(config) as cluster:
        print(f"walkthrough: local cluster of 3 v1 workers at {cluster.mcp_url}", flush=True)
        return run(LocalFleet(cluster), cluster.url, args.out, duration, args.users)
