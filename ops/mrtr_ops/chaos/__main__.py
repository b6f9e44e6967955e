"""`scripts/chaos`: faults under load, every answer checked, and a report of what each fault did.

`python -m mrtr_ops.chaos [--compose] [--duration S] [--seed N] [--out DIR] [--users N]`: the command line
only; the run itself is `mrtr_ops.chaos.run`. With `--tasks N` it is the task chaos mix instead
(`mrtr_ops.chaos.tasks_run`): N tasks under docket's fault mix and more, checked against their histories.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from mrtr_dev_issuer import ISSUER_KEY_VARIABLE, TOKEN_VARIABLE
from mrtr_ops.chaos.fleet import LocalChaosFleet
from mrtr_ops.chaos.run import EXTRA_SECONDS, READY_SECONDS, WORKER_ENV, run
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.paths import compose_lb_url, compose_project, project_root


def _compose_locust_env() -> dict[str, str]:
    """Compose requires bearer tokens: Locust mints one per user with the development issuer's key."""
    if os.environ.get(TOKEN_VARIABLE) or os.environ.get(ISSUER_KEY_VARIABLE):
        return {}
    key = project_root() / "secrets" / "issuer-private.pem"
    return {ISSUER_KEY_VARIABLE: str(key)} if key.exists() else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/chaos", description=(__doc__ or "").split("\n\n")[0])
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
    mix = parser.add_argument_group("the task chaos mix (--tasks N)")
    mix.add_argument("--tasks", type=int, default=0, help="run the task chaos mix with N tasks instead of Locust")
    mix.add_argument("--producers", type=int, default=2, help="producer processes (default 2)")
    mix.add_argument("--workers", type=int, default=4, help="workers (default 4)")
    mix.add_argument("--concurrency", type=int, default=12, help="tasks in flight per producer (default 12)")
    mix.add_argument("--redis-ha", action="store_true", help="Redis with Sentinel: the Redis fault is a failover")
    mix.add_argument("--deadline", type=float, default=1800.0, help="seconds the producers may take (default 1800)")
    mix.add_argument(
        "--rate", action="append", default=[], metavar="KIND=P", help="a fault kind's chance per tick (e.g. toxic=0)"
    )
    mix.add_argument(
        "--ensure", action="append", default=[], metavar="KIND", help="a fault kind done once early, whatever the draws"
    )
    mix.add_argument("--doc", type=Path, default=None, help="also write the report into this file's run section")
    args = parser.parse_args(argv)
    if args.tasks:
        return _tasks_mix(args)
    duration = max(60, args.duration)
    seed = args.seed if args.seed is not None else int(time.time()) % 100_000

    if args.compose:
        from mrtr_ops.compose.chaos import ComposeChaosFleet

        project = compose_project()
        url = compose_lb_url()
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


def _tasks_mix(args: argparse.Namespace) -> int:
    from mrtr_ops.chaos.tasks_run import MixOptions
    from mrtr_ops.chaos.tasks_run import run as run_mix

    rates = {}
    for item in args.rate:
        kind, _, value = item.partition("=")
        rates[kind] = float(value)
    options = MixOptions(
        tasks=args.tasks,
        producers=args.producers,
        workers=args.workers,
        concurrency=args.concurrency,
        seed=args.seed if args.seed is not None else int(time.time()) % 100_000,
        redis_ha=args.redis_ha,
        deadline=args.deadline,
        rates=rates,
        ensure=tuple(args.ensure),
    )
    return run_mix(options, args.out, doc=args.doc)


if __name__ == "__main__":
    sys.exit(main())
