"""`scripts/walkthrough`: the SEP's rolling-upgrade scenario under load, measured and drawn.

It starts the cluster (local by default, or compose), runs the Locust suite
headless against the proxy, performs the rolling upgrade from version 1 to
version 2 in the middle of the run (key rotation included), and writes
`summary.json`, `summary.md` and `timeline.png` into `--out`. Exit 0 only if
nothing failed, nothing was wrong, nothing was asked twice, and some requests
visited both versions. The command line only; the run is `mrtr_ops.walkthrough.run`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from mrtr_dev_issuer import ISSUER_KEY_VARIABLE
from mrtr_ops.compose.fleet import ComposeFleet, update_env_file
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.local.fleet import LocalFleet
from mrtr_ops.paths import compose_lb_url, compose_project, compose_prometheus_url, project_root
from mrtr_ops.walkthrough.run import STATE_TTL, WORKER_ENV, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/walkthrough", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=120, help="seconds of load (default 120; at least 60)")
    parser.add_argument("--out", type=Path, default=Path("reports/walkthrough"), help="report directory")
    parser.add_argument("--compose", action="store_true", help="use the compose cluster instead of the local one")
    parser.add_argument("--users", type=int, default=8, help="Locust users (default 8)")
    parser.add_argument(
        "--prometheus",
        action="store_true",
        help="Prometheus watches the cluster (local: Debian's binary; compose: the `monitoring` profile); its console"
        " shows the upgrade live and the report cross-checks Locust's counts (docs/monitoring.md)",
    )
    args = parser.parse_args(argv)
    duration = max(60, args.duration)

    if args.compose:
        return _on_compose(args.out, duration, args.users, prometheus=args.prometheus)

    work_dir = args.out / "cluster"
    shutil.rmtree(work_dir, ignore_errors=True)  # a fresh fleet and key ring every run
    config = ClusterConfig(
        workers=3, port=0, work_dir=work_dir, worker_env=dict(WORKER_ENV), prometheus=args.prometheus
    )
    with LocalCluster(config) as cluster:
        print(f"walkthrough: local cluster of 3 v1 workers at {cluster.mcp_url}", flush=True)
        if cluster.prometheus is not None:
            print(f"walkthrough: watch the upgrade live at {cluster.prometheus.console_url}", flush=True)
        watching = None if cluster.prometheus is None else cluster.prometheus.url
        return run(LocalFleet(cluster), cluster.url, args.out, duration, args.users, prometheus_url=watching)


def _on_compose(out: Path, duration: int, users: int, *, prometheus: bool) -> int:
    """The compose cluster from version 1 again (and with `prometheus`, the `monitoring` profile, its data fresh)."""
    project, root = compose_project(), project_root()
    env = {**os.environ, "MRTR_STATE_TTL_SECONDS": str(STATE_TTL), "MRTR_MAX_SLICE_MS": "500"}
    profiles = ["--profile", "monitoring"] if prometheus else []
    subprocess.run(["docker", "compose", *profiles, "down"], cwd=root, env=env, check=True)
    if prometheus:  # an earlier run's series would count in this run's cross-check
        volume = f"{project}_prometheus-data"
        subprocess.run(["docker", "volume", "rm", "--force", volume], check=True, stdout=subprocess.DEVNULL)
    update_env_file(root / ".env", {"MRTR_WORKERS": "3", "MRTR_V2_WORKERS": "0"})  # start from v1 again
    subprocess.run(["docker", "compose", *profiles, "up", "-d", "--wait"], cwd=root, env=env, check=True)
    url = compose_lb_url()
    watching = compose_prometheus_url() if prometheus else None
    if watching is not None:
        print(f"walkthrough: watch the upgrade live at {watching}/consoles/mrtr.html", flush=True)
    tokens = {ISSUER_KEY_VARIABLE: str(root / "secrets" / "issuer-private.pem")}  # compose wants bearer tokens
    fleet = ComposeFleet(root, project, url)
    return run(fleet, url, out, duration, users, tokens, prometheus_url=watching)


if __name__ == "__main__":
    sys.exit(main())
