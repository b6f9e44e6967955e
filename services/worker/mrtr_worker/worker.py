"""`Worker`: one worker instance, built whole from its settings and key ring.

Everything a worker is made of (identity, state codec, metrics, lifecycle, engine, the MCP
server, and the task and vault parts when a Redis is configured) is assembled here, apart from
any HTTP: the host (`mrtr_worker.app`), the operator's routes (`mrtr_worker.admin.routes`) and the
uvicorn plumbing (`mrtr_worker.listener`) all take a built `Worker`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mcp.server.mcpserver import MCPServer
from prometheus_client import Counter

from mrtr_worker.compute.engine import Engine
from mrtr_worker.config import WorkerSettings
from mrtr_worker.lifecycle import Lifecycle
from mrtr_worker.metrics import WorkerMetrics
from mrtr_worker.packs.registry import job_named
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import KeyRing
from mrtr_worker.sealing.layout import StateLayout
from mrtr_worker.server import build_mcp_server
from mrtr_worker.tasks.presence import client_name, new_incarnation
from mrtr_worker.tasks.push import TaskPush
from mrtr_worker.tasks.record import READABLE_RECORD_FORMATS
from mrtr_worker.tasks.runner import RunnerParts, RunnerTiming, TaskRunner
from mrtr_worker.tasks.sealing import RecordSealer
from mrtr_worker.tasks.service import TaskService
from mrtr_worker.tasks.store import TaskStore
from mrtr_worker.tool_api.quiet import QuietTools
from mrtr_worker.tool_api.rounds import WorkerInstance
from mrtr_worker.vault.flows import VaultFlows
from mrtr_worker.vault.tool import VaultDesk


@dataclass
class Worker:
    """One worker instance: its identity, state codec, metrics, lifecycle and MCP server."""

    settings: WorkerSettings
    identity: WorkerInstance
    codec: FleetStateCodec
    metrics: WorkerMetrics
    lifecycle: Lifecycle
    engine: Engine
    mcp: MCPServer
    tasks: TaskService | None = None
    runner: TaskRunner | None = None
    vault: VaultDesk | None = None
    push: TaskPush | None = None
    quiet: QuietTools | None = None

    @classmethod
    def from_settings(cls, settings: WorkerSettings, ring: KeyRing) -> Worker:
        layout = StateLayout(settings.version, settings.write_state_format)
        identity = WorkerInstance(instance_id=settings.instance_id, version=settings.version, layout=layout)
        metrics = WorkerMetrics()
        metrics.info.labels(version=str(settings.version)).set(1)
        codec = FleetStateCodec(ring, max_token_bytes=settings.state_max_bytes, observe=_key_counter(metrics))
        lifecycle = Lifecycle(on_rebalance=metrics.rebalances.inc)
        engine = Engine(settings.shedding, lifecycle, metrics)
        tasks, runner = _task_parts(settings, codec, identity, lifecycle, engine, metrics)
        vault = _vault_desk(settings)
        push = TaskPush(tasks, lifecycle) if tasks is not None else None
        quiet = QuietTools()
        return cls(
            settings=settings,
            identity=identity,
            codec=codec,
            metrics=metrics,
            lifecycle=lifecycle,
            engine=engine,
            mcp=build_mcp_server(
                settings, codec, metrics, identity, engine, lifecycle, tasks, vault=vault, push=push, quiet=quiet
            ),
            tasks=tasks,
            runner=runner,
            push=push,
            vault=vault,
            quiet=quiet,
        )

    def tasks_health(self) -> dict[str, object]:
        """The `tasks` field of /readyz: whether tasks are on and whether the runner reaches Redis.

        Read from the runner's last exchange with Redis (it polls the queue every poll interval),
        never by a probe of its own: a readiness check must stay instant even when Redis hangs.
        """
        if self.runner is None:
            return {"enabled": False}
        if self.runner.last_error is not None:
            return {"enabled": True, "store": "unreachable", "reason": self.runner.last_error[:200]}
        return {"enabled": True, "store": "ok"}

    def drain(self) -> None:
        self.lifecycle.drain()
        self.metrics.ready.set(0)
        if self.push is not None:
            self.push.close()  # task listens end now, so their clients listen again elsewhere


def _key_counter(metrics: WorkerMetrics) -> Callable[[str, str], None]:
    """Count seals and opens per key; each (operation, key) child is looked up once (two per hop otherwise)."""
    children: dict[tuple[str, str], Counter] = {}

    def count(operation: str, key: str) -> None:
        child = children.get((operation, key))
        if child is None:
            child = children[(operation, key)] = metrics.state_keys.labels(operation=operation, key=key)
        child.inc()

    return count


def _task_parts(
    settings: WorkerSettings,
    codec: FleetStateCodec,
    identity: WorkerInstance,
    lifecycle: Lifecycle,
    engine: Engine,
    metrics: WorkerMetrics,
) -> tuple[TaskService | None, TaskRunner | None]:
    """The task service and runner when a Redis (URL or sentinels) is configured; (None, None) leaves tasks off."""
    target = settings.redis_target()
    if target is None:
        return None, None
    sealer = RecordSealer(codec, READABLE_RECORD_FORMATS[settings.version])
    incarnation = new_incarnation()  # named on every connection: peers see this process die (`tasks.presence`)
    name = client_name(settings.redis_prefix, identity.instance_id, incarnation)
    store = TaskStore.connect(
        target, sealer, prefix=settings.redis_prefix, wait=settings.redis_wait(), client_name=name
    )
    service = TaskService(
        store,
        ttl_ms=settings.task_ttl_ms,
        poll_ms=settings.task_poll_interval_ms,
        max_live=settings.max_live_tasks,
        jobs=job_named,
    )
    parts = RunnerParts(
        store, identity, lifecycle, engine, metrics, job_named, policy=engine.policy, slots=engine.slots
    )
    timing = RunnerTiming(
        concurrency=settings.task_concurrency,
        slice_ms=settings.task_slice_ms,
        lease_ms=settings.task_lease_ms,
        poll_ms=settings.task_poll_interval_ms,
        beat_ms=settings.task_heartbeat_ms,
        dead_ms=settings.task_dead_ms,
        max_run_ms=settings.task_max_run_ms,
        history_max=settings.task_history_max,
    )
    runner = TaskRunner(parts, timing, incarnation=incarnation)
    return service, runner


def _vault_desk(settings: WorkerSettings) -> VaultDesk | None:
    """The vault flows (in the task store's Redis, under its prefix) when a Redis (URL or sentinels) is configured."""
    target = settings.redis_target()
    if target is None:
        return None
    ttl_ms = int(settings.state_ttl_seconds * 1000)  # a flow lives no longer than the state that carries it
    return VaultDesk(VaultFlows.connect(target, prefix=settings.redis_prefix, ttl_ms=ttl_ms), settings.public_base())
