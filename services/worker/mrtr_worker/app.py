"""The worker's HTTP host: FastAPI around the SDK's Streamable HTTP endpoint.

`POST /mcp` is the SDK's stateless 2026-07-28 handler (no initialize, no
session id). Beside it the host serves what an orchestrator needs:
`/healthz` (alive), `/readyz` (ready for traffic; 503 while draining),
`/metrics` (Prometheus), and the operator's `/admin/...` endpoints (drain,
key ring reload, state format; `mrtr_worker.admin`). The proxy forwards only `/mcp`, and the
admin endpoints also require the operator's token when one is configured.
`/mcp` itself takes bearer tokens (see `mrtr_worker.auth`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from prometheus_client import CONTENT_TYPE_LATEST, Counter, generate_latest

from mrtr_worker import rejections
from mrtr_worker.admin import admin_router
from mrtr_worker.auth import JwtVerifier, authenticate
from mrtr_worker.body_limit import BodyLimit
from mrtr_worker.compute.engine import Engine
from mrtr_worker.config import WorkerSettings
from mrtr_worker.fast_resume import FastResume
from mrtr_worker.front_door import FrontDoor
from mrtr_worker.headers import InstanceHeaders
from mrtr_worker.keyring import KeyRing
from mrtr_worker.lifecycle import Lifecycle
from mrtr_worker.metrics import WorkerMetrics
from mrtr_worker.modern_only import ModernOnly
from mrtr_worker.quiet_calls import QuietCalls, QuietTools
from mrtr_worker.rounds import WorkerInstance
from mrtr_worker.server import build_mcp_server, tracing_configured
from mrtr_worker.state_codec import FleetStateCodec
from mrtr_worker.state_layout import StateLayout
from mrtr_worker.tasks.presence import client_name, new_incarnation
from mrtr_worker.tasks.push import TaskPush
from mrtr_worker.tasks.record import READABLE_RECORD_FORMATS
from mrtr_worker.tasks.runner import TaskRunner
from mrtr_worker.tasks.sealing import RecordSealer
from mrtr_worker.tasks.service import TaskService
from mrtr_worker.tasks.store import TaskStore
from mrtr_worker.vault.flows import VaultFlows
from mrtr_worker.vault.routes import VaultSite, vault_router
from mrtr_worker.vault.session import SessionCodec
from mrtr_worker.vault.tool import VaultDesk

logger = logging.getLogger(__name__)


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
        codec = FleetStateCodec(ring, max_token_bytes=settings.state_max_bytes, observe=_key_counter(metrics))
        lifecycle = Lifecycle(on_rebalance=metrics.rebalances.inc)
        engine = Engine(settings.shedding_settings(), lifecycle, metrics)
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
        store, ttl_ms=settings.task_ttl_ms, poll_ms=settings.task_poll_interval_ms, max_live=settings.max_live_tasks
    )
    runner = TaskRunner(
        store,
        identity,
        lifecycle,
        engine,
        metrics,
        concurrency=settings.task_concurrency,
        slice_ms=settings.task_slice_ms,
        lease_ms=settings.task_lease_ms,
        poll_ms=settings.task_poll_interval_ms,
        policy=engine.policy,
        slots=engine.slots,
        incarnation=incarnation,
        beat_ms=settings.task_heartbeat_ms,
        dead_ms=settings.task_dead_ms,
        max_run_ms=settings.task_max_run_ms,
        history_max=settings.task_history_max,
    )
    return service, runner


def _vault_desk(settings: WorkerSettings) -> VaultDesk | None:
    """The vault flows (in the task store's Redis, under its prefix) when a Redis (URL or sentinels) is configured."""
    target = settings.redis_target()
    if target is None:
        return None
    ttl_ms = int(settings.state_ttl_seconds * 1000)  # a flow lives no longer than the state that carries it
    return VaultDesk(VaultFlows.connect(target, prefix=settings.redis_prefix, ttl_ms=ttl_ms), settings.public_base())


def _token_verifier(settings: WorkerSettings) -> JwtVerifier | None:
    """The configured issuer's verifier, or None when no issuer is configured (anonymous only)."""
    if settings.jwt_public_key_file is None and settings.jwt_jwks_url is None:
        return None
    return JwtVerifier(
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        algorithms=settings.jwt_algorithms,
        public_key_file=settings.jwt_public_key_file,
        jwks_url=settings.jwt_jwks_url,
    )


def _fast_resume(worker: Worker, quiet: QuietTools) -> FastResume | None:
    """The resume fast path, unless the settings turn it off or tracing is on (every request then gets its span)."""
    if not worker.settings.fast_resume or tracing_configured():
        return None
    return FastResume.build(
        worker.mcp,
        worker.mcp.session_manager,
        worker.codec,
        quiet.silent,
        max_body_bytes=worker.settings.max_body_bytes,
        registry=worker.metrics.registry,
    )


def create_app(settings: WorkerSettings, ring: KeyRing | None = None) -> FrontDoor:
    """Build the ASGI app of one worker; `ring` defaults to the one the settings name.

    `/mcp` is served by the MCP stack directly, the rest by FastAPI (`front_door`).
    The app's `state.worker` is the `Worker`; a host that wants the process to
    end after a drain sets `worker.lifecycle.on_drained`.
    """
    worker = Worker.from_settings(settings, ring or KeyRing.parse(settings.keyring_text()))
    mcp_app = worker.mcp.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=settings.allowed_hosts,
            allowed_origins=settings.allowed_origins,
        ),
        max_request_body_size=settings.max_body_bytes,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        handler = rejections.install(worker.metrics.state_rejections)
        await worker.engine.start()
        if worker.runner is not None:
            await worker.runner.start()  # never fails on Redis: its loops retry until Redis answers
        if worker.push is not None:
            worker.push.start()
        worker.metrics.ready.set(1)
        try:
            async with worker.mcp.session_manager.run():
                logger.info("worker %s (v%s) ready", worker.identity.instance_id, worker.identity.version)
                yield
        finally:
            if worker.push is not None:
                await worker.push.stop()
            if worker.runner is not None:
                await worker.runner.stop(grace_seconds=settings.drain_timeout_seconds)
            if worker.tasks is not None:
                await worker.tasks.store.close()
            if worker.vault is not None:
                await worker.vault.flows.close()
            await worker.engine.stop()
            logging.getLogger(rejections.SDK_LOGGER).removeHandler(handler)

    app = FastAPI(title="mrtr-worker", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.worker = worker
    admin = admin_router(worker)
    verifier = _token_verifier(settings)
    authenticated_mcp = authenticate(
        ModernOnly(BodyLimit(mcp_app, settings.max_body_bytes)),
        verifier,
        allow_anonymous=settings.allow_anonymous,
        required_scopes=settings.required_scopes,
    )

    @app.get("/healthz")
    async def healthz() -> dict[str, object]:
        identity = worker.identity
        return {"status": "alive", "instance": identity.instance_id, "version": identity.version}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        """Ready for MRTR traffic. Redis is reported under `tasks` but never makes the worker unready:
        everything but tasks works without it, and pulling every worker out of rotation over a store
        outage would break the calls that do not need it."""
        ready = worker.lifecycle.ready
        body = {"ready": ready, "tasks": worker.tasks_health()}
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(worker.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app.include_router(admin)
    flows = None if worker.vault is None else worker.vault.flows
    sessions = SessionCodec(worker.codec)
    site = VaultSite(flows, verifier, sessions, settings.public_base(), tuple(settings.required_scopes))
    app.include_router(vault_router(site))
    app.mount("/", authenticated_mcp)  # after the host routes, so they match first (odd paths: the SDK's 404s)
    app.add_middleware(InstanceHeaders, instance_id=worker.identity.instance_id, version=worker.identity.version)
    # The hot path: `/mcp` skips FastAPI and the SDK's Starlette wrapper (see `front_door`).
    quiet = worker.quiet or QuietTools()
    calls = QuietCalls(worker.mcp.session_manager, quiet, _fast_resume(worker, quiet))
    fast_mcp = authenticate(
        ModernOnly(BodyLimit(calls, settings.max_body_bytes)),  # every /mcp body bounded (413, JSON-RPC)
        verifier,
        allow_anonymous=settings.allow_anonymous,
        required_scopes=settings.required_scopes,
    )
    instance = worker.identity
    return FrontDoor(
        mcp=InstanceHeaders(fast_mcp, instance_id=instance.instance_id, version=instance.version), host=app
    )
