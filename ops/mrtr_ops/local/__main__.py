"""`python -m mrtr_ops.local` (or `scripts/cluster`): run the local cluster until interrupted."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from mrtr_ops.local.cluster import DEFAULT_PACKS, ClusterConfig, LocalCluster
from mrtr_ops.local.control import ControlServer
from mrtr_ops.local.fleet import LocalFleet
from mrtr_ops.local.process import LOOPBACK, NotReady
from mrtr_ops.local.redis import RedisMissing
from mrtr_ops.local.sentinel import SERVICE, SentinelTiming

NO_REDIS_BINARY = (
    "cluster: redis-server is not installed (as root, scripts/redis-setup installs Debian's): starting WITHOUT "
    "Redis; the workers serve MRTR and everything else, but not tasks (tasks/* calls get an error)"
)


def _versions(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v.strip())


def worker_env(args: argparse.Namespace) -> dict[str, str]:
    """The workers' settings the command line sets (the rest come from the environment or the defaults)."""
    env = {"MRTR_WORKER_SHEDDING": "true" if args.shedding == "on" else "false"}
    if args.max_slice_ms is not None:
        env["MRTR_WORKER_MAX_SLICE_MS"] = str(args.max_slice_ms)
    if args.step_aside:
        env["MRTR_WORKER_STEP_ASIDE"] = "true"
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/cluster", description=__doc__)
    parser.add_argument("--workers", type=int, default=3, help="number of workers (default 3)")
    parser.add_argument("--port", type=int, default=8080, help="proxy port on 127.0.0.1 (0: any free port)")
    parser.add_argument(
        "--admin-port",
        type=int,
        help="the proxy's admin listener on 127.0.0.1 (default: the proxy's port + 10, so 8090; with --port 0, "
        "any free port)",
    )
    parser.add_argument("--versions", type=_versions, default=(), help="worker versions in order, e.g. 1,1,2")
    parser.add_argument("--packs", default=",".join(DEFAULT_PACKS), help="tool packs every worker serves")
    parser.add_argument("--work-dir", type=Path, default=Path(".cache/cluster"), help="logs and the key ring")
    parser.add_argument("--shedding", choices=("on", "off"), default="on", help="hand long work back under load")
    parser.add_argument("--max-slice-ms", type=int, help="time slice of a computation (0: off)")
    parser.add_argument(
        "--step-aside",
        action="store_true",
        help="a worker that knows it is slow leaves the proxy's rotation until a probe is due (MRTR_WORKER_STEP_ASIDE)",
    )
    parser.add_argument(
        "--auth",
        action="store_true",
        help="require bearer tokens (development issuer in secrets/; mint one with scripts/mint-token SUBJECT)",
    )
    parser.add_argument("--url-file", type=Path, help="write the MCP URL here once the cluster is ready")
    parser.add_argument(
        "--no-redis", action="store_true", help="no task store: MRTR only, the workers do not offer tasks"
    )
    parser.add_argument("--redis-port", type=int, default=0, help="Redis's port on 127.0.0.1 (default: a free one)")
    parser.add_argument(
        "--redis-ha",
        action="store_true",
        help="Redis with Sentinel: a primary, replicas and three sentinels; the workers follow a failover",
    )
    parser.add_argument("--redis-replicas", type=int, default=2, help="replicas with --redis-ha (default 2)")
    parser.add_argument(
        "--redis-wait",
        type=int,
        default=1,
        help="with --redis-ha: replicas every task write waits for (Redis WAIT; 0: none; default 1)",
    )
    parser.add_argument(
        "--sentinel-down-after-ms",
        type=int,
        default=SentinelTiming.down_after_ms,
        help="with --redis-ha: silence before a sentinel holds the primary down (default %(default)s)",
    )
    parser.add_argument(
        "--prometheus",
        action="store_true",
        help="run Prometheus watching the cluster (Debian's, scripts/prometheus-setup; see docs/monitoring.md)",
    )
    parser.add_argument(
        "--prometheus-port", type=int, default=9090, help="Prometheus's port on 127.0.0.1 (default 9090; 0: a free one)"
    )
    args = parser.parse_args(argv)

    redis = not args.no_redis
    if redis and shutil.which("redis-server") is None:
        print(NO_REDIS_BINARY, file=sys.stderr, flush=True)
        redis = False
    if redis and args.redis_ha and shutil.which("redis-sentinel") is None:
        print("cluster: --redis-ha needs redis-sentinel (as root, scripts/redis-setup installs it)", file=sys.stderr)
        return 1

    config = ClusterConfig(
        workers=args.workers,
        port=args.port,
        admin_port=args.admin_port if args.admin_port is not None else (args.port + 10 if args.port else 0),
        versions=args.versions,
        tool_packs=tuple(p for p in args.packs.split(",") if p),
        work_dir=args.work_dir,
        auth=args.auth,
        issuer_dir=Path("secrets") if args.auth else None,
        worker_env=worker_env(args),
        redis=redis,
        redis_port=args.redis_port,
        redis_ha=args.redis_ha,
        redis_replicas=args.redis_replicas,
        redis_wait_replicas=args.redis_wait,
        sentinel_timing=SentinelTiming(down_after_ms=args.sentinel_down_after_ms),
        prometheus=args.prometheus,
        prometheus_port=args.prometheus_port,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    cluster = LocalCluster(config)
    try:
        cluster.start()
    except (NotReady, RedisMissing, RuntimeError, TimeoutError) as exc:
        print(f"cluster: {exc}", file=sys.stderr)
        return 1
    control = ControlServer(LocalFleet(cluster)).start()
    (config.work_dir / "control.url").write_text(control.url)
    try:
        workers = ", ".join(f"{h.instance_id} v{h.spec.version} {h.url}" for h in cluster.workers.values())
        print(f"MCP endpoint: {cluster.mcp_url}\nworkers: {workers}\nlogs: {config.work_dir / 'logs'}", flush=True)
        print(f"control: {control.url}  (scripts/rolling-upgrade uses it)", flush=True)
        token_file = config.work_dir / "secrets" / "admin-token"
        print(f"proxy admin: {cluster.admin_url}/lb/backends  (Authorization: Bearer $(cat {token_file}))", flush=True)
        print(_where_redis_runs(cluster), flush=True)
        if cluster.prometheus is not None:
            print(f"prometheus: {cluster.prometheus.url}  (rules: deploy/prometheus; docs/monitoring.md)", flush=True)
            print(f"console: {cluster.prometheus.console_url}", flush=True)
        token = '--token "$(scripts/mint-token alice)" ' if args.auth else ""
        print(f"try: .venv/bin/mrtr-call {token}link_accounts   (Ctrl-C stops the cluster)", flush=True)
        if args.url_file is not None:
            args.url_file.write_text(cluster.mcp_url)
        stop.wait()
    finally:
        control.stop()
        (config.work_dir / "control.url").unlink(missing_ok=True)
        cluster.stop()
    return 0


def _where_redis_runs(cluster: LocalCluster) -> str:
    ha = cluster.redis_ha
    if ha is not None:
        primary = ha.primary()
        replicas = ", ".join(f"{LOOPBACK}:{node.port}" for node in ha.replicas())
        return (
            f"redis: Sentinel service {SERVICE!r} via {ha.sentinel_addresses}; primary {LOOPBACK}:{primary.port} "
            f"(pid {primary.pid}), replicas {replicas}; writes wait for {cluster.config.redis_wait_replicas} "
            f"replica(s); data and logs in {ha.directory}"
        )
    if cluster.redis is None:
        return "redis: none (tasks are off; the workers serve everything else)"
    redis = cluster.redis
    return f"redis: {redis.url}  (task store; data {redis.directory}, log {redis.log_path}, pid {redis.pid})"


if __name__ == "__main__":
    raise SystemExit(main())
