"""The local cluster: the round-robin proxy, N workers and the task store (Redis, or Redis with Sentinel) as
processes on 127.0.0.1.

The embedded default (no Docker needed): the same worker and proxy code the
containers run, started the way `scripts/cluster` starts them. Tests, the
benchmarks, the walkthrough and the chaos run drive it through this class.
"""

from __future__ import annotations

import itertools
import os
import secrets
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from mrtr_dev_issuer import PUBLIC_KEY_NAME, DevIssuer
from mrtr_ops.lb_admin import LbAdmin
from mrtr_ops.local.cable import Cable, Switchboard
from mrtr_ops.local.process import LOOPBACK, ManagedProcess, WorkerSpec, free_port
from mrtr_ops.local.prometheus import LocalPrometheus
from mrtr_ops.local.redis import REDIS_URL_VARIABLE, RedisServer
from mrtr_ops.local.redis_ha import RedisHA
from mrtr_ops.local.sentinel import SentinelTiming
from mrtr_ops.metrics_page import MetricsPage
from mrtr_worker.sealing.keyring import new_ring

PUBLIC_URL_VARIABLE = "MRTR_WORKER_PUBLIC_URL"
PROXIED_PATHS = "/mcp,/vault/connect,/vault/sign-in"
"""What the proxy forwards: MCP, and the vault page that URL-mode elicitation sends users to (any worker serves it)."""

DEFAULT_PACKS = ("demo", "compute", "conformance")
"""The development cluster serves the conformance fixtures too, so any MCP harness can be pointed at it (a test
pack: `mrtr-test-packs`, which `mrtr-ops` depends on, so it is installed wherever this cluster runs)."""


@dataclass
class ClusterConfig:
    workers: int = 3
    port: int = 8080
    """The proxy's port on 127.0.0.1 (0 picks a free one)."""
    admin_port: int = 0
    """The proxy's admin listener on 127.0.0.1 (0 picks a free one; `scripts/cluster`: its port + 10, so 8090)."""
    versions: tuple[int, ...] = ()
    """Version of each worker in order; missing entries repeat the last one (default: all version 1)."""
    tool_packs: tuple[str, ...] = DEFAULT_PACKS
    work_dir: Path = Path(".cache/cluster")
    keyring_file: Path | None = None
    """The fleet's key ring; by default `work_dir/secrets/keyring.json`, generated on first run."""
    auth: bool = False
    """Require bearer tokens of the development issuer in `issuer_dir` (anonymous calls are the default)."""
    issuer_dir: Path | None = None
    """Where the development issuer's keys live (generated on first use); default `work_dir/secrets`."""
    admin_token: str | None = None
    """The fleet's admin token: the workers' /admin and the proxy's admin listener want it. None: the one in
    `work_dir/secrets/admin-token`, generated on first use (like the key ring)."""
    worker_env: dict[str, str] = field(default_factory=dict)
    lb_env: dict[str, str] = field(default_factory=dict)
    cables: bool = False
    """Reach each worker through a cable the cluster can cut (`mrtr_ops.local.cable`): chaos runs."""
    ready_timeout: float = 180.0
    """Seconds a starting worker may take to become ready (a busy machine needs more)."""
    redis: bool = True
    """Run the task store: one `redis-server` in `work_dir/redis`, its URL in every worker's environment.

    Off (`scripts/cluster --no-redis`): the workers serve MRTR and everything else, but not tasks.
    """
    redis_port: int = 0
    """Redis's port on 127.0.0.1 (0 picks a free one)."""
    redis_ha: bool = False
    """Instead of the one Redis: a primary, `redis_replicas` replicas and three sentinels (`RedisHA`, in
    `work_dir/redis-ha`); the workers reach the primary through the sentinels (`scripts/cluster --redis-ha`)."""
    redis_replicas: int = 2
    redis_wait_replicas: int = 1
    """With `redis_ha`: replicas each task write waits for (`MRTR_WORKER_REDIS_WAIT_REPLICAS`; 0: no WAIT)."""
    sentinel_timing: SentinelTiming = field(default_factory=SentinelTiming)
    prometheus: bool = False
    """Run Prometheus (and a Redis exporter per node) watching the cluster, in `work_dir/prometheus`
    (`scripts/cluster --prometheus`)."""
    prometheus_port: int = 0
    """Prometheus's port on 127.0.0.1 (0 picks a free one)."""

    def version_of(self, index: int) -> int:
        if not self.versions:
            return 1
        return self.versions[min(index, len(self.versions) - 1)]


@dataclass
class WorkerHandle:
    spec: WorkerSpec
    process: ManagedProcess
    cable: Cable | None = None

    @property
    def instance_id(self) -> str:
        return self.spec.instance_id

    @property
    def url(self) -> str:
        """The worker's own address: /metrics, /admin, and /mcp without the proxy."""
        return self.spec.url

    @property
    def lb_url(self) -> str:
        """The address the proxy knows the worker by: its cable's, if it has one."""
        return self.cable.url if self.cable is not None else self.spec.url


class LocalCluster:
    """Start, change and stop a proxy plus workers; every change waits until the proxy has seen it."""

    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.port = config.port or free_port()
        self.workers: dict[str, WorkerHandle] = {}
        self._numbers = itertools.count(1)
        self._log_dir = config.work_dir / "logs"
        self.keyring_file = config.keyring_file or config.work_dir / "secrets" / "keyring.json"
        self.admin_port = config.admin_port or free_port()
        self.admin_token = config.admin_token or _admin_token(config.work_dir / "secrets" / "admin-token")
        """The fleet's admin token (the workers' /admin, the proxy's admin listener)."""
        self.backends_file = config.work_dir / "lb-backends"
        """The proxy's discovery: the workers that joined, one URL a line (written by this class only)."""
        self._joined: dict[str, str] = {}
        """instance id -> the URL the proxy knows it by, for the workers in `backends_file`."""
        self._proxy: ManagedProcess | None = None
        self._http = httpx.Client(timeout=5.0)
        self.lb = LbAdmin(self.admin_url, self.admin_token)
        """The proxy's admin API: its backends, drain and undrain, its metrics."""
        self._switchboard = Switchboard() if config.cables else None
        self.redis: RedisServer | None = None
        """The task store (None with `ClusterConfig.redis` off or `redis_ha` on); stop, kill and restart keep its
        data."""
        self.redis_ha: RedisHA | None = None
        """The task store with Sentinel (`ClusterConfig.redis_ha`): its nodes, its sentinels and its faults."""
        if config.redis and config.redis_ha:
            self.redis_ha = RedisHA(
                config.work_dir / "redis-ha", replicas=config.redis_replicas, timing=config.sentinel_timing
            )
        elif config.redis:
            self.redis = RedisServer(config.work_dir / "redis", port=config.redis_port or free_port())
        self.prometheus: LocalPrometheus | None = None
        """Prometheus watching this cluster (`ClusterConfig.prometheus`): its URL, its configuration."""
        if config.prometheus:
            self.prometheus = LocalPrometheus(
                config.work_dir / "prometheus",
                proxy_admin=f"{LOOPBACK}:{self.admin_port}",
                admin_token=self.admin_token,
                redis_ports=self._redis_ports(),
                port=config.prometheus_port or free_port(),
            )

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    @property
    def admin_url(self) -> str:
        """The proxy's admin listener (not the public port): `/lb/backends`, `/lb/metrics`, drain."""
        return f"http://{LOOPBACK}:{self.admin_port}"

    @property
    def redis_url(self) -> str | None:
        """What every worker gets as `MRTR_WORKER_REDIS_URL` (None: no task store)."""
        return None if self.redis is None else self.redis.url

    # --- whole cluster -----------------------------------------------------------------------------

    def start(self) -> LocalCluster:
        self._ensure_keyring()
        try:
            if self.redis is not None:
                self.redis.start()  # before the workers: they find their task store at start
            if self.redis_ha is not None:
                self.redis_ha.start()
            started = [self._start_worker(self.config.version_of(i)) for i in range(self.config.workers)]
            for handle in started:
                handle.process.wait_ready(self.config.ready_timeout)
            self._list_backends({h.instance_id: h.lb_url for h in started})
            self._proxy = self._proxy_process().start()
            self._proxy.wait_ready()
            self.lb.wait_for_backends([h.lb_url for h in started])
            if self.prometheus is not None:
                self.prometheus.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM everything (Prometheus, the workers: they drain first), then the proxy, Redis last (its
        append-only file flushed)."""
        if self.prometheus is not None:
            self.prometheus.stop()
        for handle in list(self.workers.values()):
            handle.process.stop()
        self.workers.clear()
        if self._proxy is not None:
            self._proxy.stop()
            self._proxy = None
        if self._switchboard is not None:
            self._switchboard.close()
            self._switchboard = None
        if self.redis is not None:
            self.redis.stop()
        if self.redis_ha is not None:
            self.redis_ha.stop()
        self._http.close()
        self.lb.close()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- membership changes ------------------------------------------------------------------------

    def add_worker(self, version: int = 1, *, extra_env: dict[str, str] | None = None) -> WorkerHandle:
        """Start a worker, wait until it is ready, and put it in the proxy's rotation."""
        return self.join_worker(self.start_worker(version, extra_env=extra_env))

    def start_worker(self, version: int = 1, *, extra_env: dict[str, str] | None = None) -> WorkerHandle:
        """Start a worker and wait until it is ready, still outside the proxy's rotation (`join_worker` puts it in).

        Apart so that a test can have the capacity ready and make it join at a moment of its choosing.
        """
        handle = self._start_worker(version, extra_env)
        handle.process.wait_ready(self.config.ready_timeout)
        return handle

    def join_worker(self, handle: WorkerHandle) -> WorkerHandle:
        """Put a started worker in the proxy's rotation (the proxy then tells the others: capacity joined).

        It joins through the proxy's discovery, the backends file this cluster writes: the proxy's admin API
        has no "add", so nobody else can put a listener into the rotation.
        """
        self._list_backends({**self._joined, handle.instance_id: handle.lb_url})
        self.lb.wait_for_backend(handle.lb_url)
        return handle

    def drain_worker(self, instance_id: str, *, timeout: float = 30.0) -> float:
        """Drain a worker (its computations hand back), wait for it to exit, forget it. Returns seconds taken."""
        handle = self.workers.pop(instance_id)
        started = time.monotonic()
        self.lb.drain(handle.lb_url)
        self._http.post(f"{handle.url}/admin/drain", headers=self.admin_headers).raise_for_status()
        assert handle.process.popen is not None
        handle.process.popen.wait(timeout)
        elapsed = time.monotonic() - started
        handle.process.stop()
        self.forget_worker(handle)
        return elapsed

    def forget_worker(self, handle: WorkerHandle) -> None:
        """Take a (stopped) worker out of the proxy's discovery; returns once the proxy no longer lists it."""
        self._list_backends({i: url for i, url in self._joined.items() if i != handle.instance_id})
        self.lb.wait_until_gone(handle.lb_url)
        self._unplug(handle)

    def kill_worker(self, instance_id: str) -> None:
        """SIGKILL: a crash. The proxy notices by itself (failed connections, failed health checks)."""
        handle = self.workers[instance_id]
        if handle.cable is not None:
            handle.cable.hang_up()  # a dead process's port refuses connections
        handle.process.kill()

    def restart_worker(self, instance_id: str) -> WorkerHandle:
        """Start a killed worker again, same identity and port (a supervisor's restart); back in rotation."""
        handle = self.workers[instance_id]
        if handle.process.running:
            raise RuntimeError(f"{instance_id} is still running (pid {handle.process.pid})")
        handle.process = handle.spec.process(self._log_dir).start()
        handle.process.wait_ready(self.config.ready_timeout)
        if handle.cable is not None:
            handle.cable.plug()
        self.lb.wait_for_backend(handle.lb_url)
        return handle

    def pause_worker(self, instance_id: str) -> None:
        self.workers[instance_id].process.signal(signal.SIGSTOP)

    def resume_worker(self, instance_id: str) -> None:
        self.workers[instance_id].process.signal(signal.SIGCONT)

    def cut_worker(self, instance_id: str) -> None:
        """Cut the worker's cable: the proxy can no longer reach it, and it runs on (`ClusterConfig.cables`)."""
        self._cable(instance_id).cut()

    def restore_worker(self, instance_id: str) -> None:
        self._cable(instance_id).restore()

    # --- observation -------------------------------------------------------------------------------

    def worker_metrics(self, instance_id: str) -> MetricsPage:
        """One scrape of a worker's own `/metrics`."""
        return MetricsPage.parse(self._http.get(f"{self.workers[instance_id].url}/metrics").text)

    def worker_metric(self, instance_id: str, name: str, **labels: str) -> float:
        """A worker's samples called `name` with these labels, summed (0 if absent)."""
        return self.worker_metrics(instance_id).value(name, **labels)

    @property
    def proxy_pid(self) -> int:
        """The proxy process's id (CPU accounting in the benchmarks)."""
        if self._proxy is None:
            raise RuntimeError("the cluster is not running")
        return self._proxy.pid

    @property
    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}

    @property
    def issuer(self) -> DevIssuer:
        """The development issuer whose tokens the workers accept (with `auth` on)."""
        return DevIssuer.ensure(self.config.issuer_dir or self.config.work_dir / "secrets")

    @property
    def _issuer_public_key(self) -> Path | None:
        if not self.config.auth:
            return None
        directory = self.config.issuer_dir or self.config.work_dir / "secrets"
        DevIssuer.ensure(directory)
        return directory / PUBLIC_KEY_NAME

    # --- internals ---------------------------------------------------------------------------------

    def _ensure_keyring(self) -> None:
        if not self.keyring_file.exists():
            self.keyring_file.parent.mkdir(parents=True, exist_ok=True)
            self.keyring_file.write_text(new_ring("local-1").dumps())
            self.keyring_file.chmod(0o600)

    def _start_worker(self, version: int, extra_env: dict[str, str] | None = None) -> WorkerHandle:
        store = {} if self.redis is None else {REDIS_URL_VARIABLE: self.redis.url}
        if self.redis_ha is not None:
            store = self.redis_ha.worker_env(wait_replicas=self.config.redis_wait_replicas)
        public = {PUBLIC_URL_VARIABLE: self.url}  # the vault page's links point at the proxy, like /mcp
        env = {**store, **public, **self.config.worker_env, **(extra_env or {})}
        spec = WorkerSpec(
            instance_id=f"w{next(self._numbers)}",
            port=free_port(),
            keyring_file=self.keyring_file,
            version=version,
            tool_packs=self.config.tool_packs,
            issuer_public_key=self._issuer_public_key,
            admin_token=self.admin_token,
            extra_env=tuple(env.items()),
        )
        handle = WorkerHandle(spec, spec.process(self._log_dir).start())
        if self._switchboard is not None:
            handle.cable = self._switchboard.cable(spec.port)
        self.workers[spec.instance_id] = handle
        return handle

    def _cable(self, instance_id: str) -> Cable:
        cable = self.workers[instance_id].cable
        if cable is None:
            raise RuntimeError("this cluster has no cables to cut (ClusterConfig.cables)")
        return cable

    def _unplug(self, handle: WorkerHandle) -> None:
        if handle.cable is not None:
            handle.cable.close()

    def _list_backends(self, joined: dict[str, str]) -> None:
        """Write the proxy's backends file at once (a new file renamed over the old: never read half-written)."""
        self._joined = dict(joined)
        fresh = self.backends_file.with_name(self.backends_file.name + ".new")
        fresh.parent.mkdir(parents=True, exist_ok=True)
        fresh.write_text("".join(f"{url}\n" for url in self._joined.values()))
        os.replace(fresh, self.backends_file)
        if self.prometheus is not None:
            self.prometheus.watch_workers({instance_id: handle.url for instance_id, handle in self.workers.items()})

    def _redis_ports(self) -> tuple[int, ...]:
        if self.redis_ha is not None:
            return tuple(node.port for node in self.redis_ha.nodes)
        return () if self.redis is None else (self.redis.port,)

    def _proxy_process(self) -> ManagedProcess:
        env = {
            **os.environ,
            "MRTR_LB_HOST": LOOPBACK,
            "MRTR_LB_PORT": str(self.port),
            "MRTR_LB_ADMIN_HOST": LOOPBACK,
            "MRTR_LB_ADMIN_PORT": str(self.admin_port),
            "MRTR_LB_BACKENDS_FILE": str(self.backends_file),
            "MRTR_LB_BACKENDS_FILE_INTERVAL": "0.1",
            "MRTR_LB_PROXY_PATHS": PROXIED_PATHS,
            "PYTHONUNBUFFERED": "1",
            # The fleet's token: the proxy's admin listener wants it, and the proxy sends it to the workers
            # when capacity joins (POST /admin/rebalance).
            "MRTR_LB_ADMIN_TOKEN": self.admin_token,
            **self.config.lb_env,
        }
        return ManagedProcess(
            name="lb",
            argv=[sys.executable, "-m", "mrtr_lb"],
            env=env,
            log_path=self._log_dir / "lb.log",
            ready_url=f"{self.admin_url}/lb/healthz",
        )


def _admin_token(path: Path) -> str:
    """The token in `path`, made (random, mode 0600) on first use: the same for every run of one work dir."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fresh = path.with_name(path.name + ".new")
        fresh.write_text(secrets.token_urlsafe(32) + "\n")
        fresh.chmod(0o600)
        os.replace(fresh, path)
    return path.read_text().strip()
