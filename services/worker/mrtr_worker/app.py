"""The worker's HTTP host: FastAPI around the SDK's Streamable HTTP endpoint.

`POST /mcp` is the SDK's stateless 2026-07-28 handler (no initialize, no
session id). Beside it the host serves what an orchestrator needs:
`/healthz` (alive), `/readyz` (ready for traffic; 503 while draining, 429 while stepping aside as slow),
`/metrics` (Prometheus), and the operator's `/admin/...` endpoints (drain,
key ring reload, state format; `mrtr_worker.admin.routes`). The proxy forwards only `/mcp`, and the
admin endpoints also require the operator's token when one is configured.
`/mcp` itself takes bearer tokens (see `mrtr_worker.edge.auth`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from mcp.server.transport_security import TransportSecuritySettings
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from mrtr_protocol.fleet import READINESS_PATH, Readiness
from mrtr_worker.admin.routes import admin_router
from mrtr_worker.config import WorkerSettings
from mrtr_worker.edge.auth import JwtVerifier, authenticate
from mrtr_worker.edge.body_limit import BodyLimit
from mrtr_worker.edge.fast_resume import FastResume
from mrtr_worker.edge.front_door import FrontDoor
from mrtr_worker.edge.headers import InstanceHeaders
from mrtr_worker.edge.modern_only import ModernOnly
from mrtr_worker.edge.quiet_calls import QuietCalls
from mrtr_worker.mcp_middleware import rejections
from mrtr_worker.sealing.keyring import KeyRing
from mrtr_worker.server import tracing_configured
from mrtr_worker.tool_api.quiet import QuietTools
from mrtr_worker.vault.routes import VaultSite, vault_router
from mrtr_worker.vault.session import SessionCodec
from mrtr_worker.worker import Worker

logger = logging.getLogger(__name__)


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
        resumes=worker.metrics.fast_resumes,
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

    @app.get(READINESS_PATH)
    async def readyz() -> JSONResponse:
        """Ready for MRTR traffic, told by the status (`mrtr_protocol.fleet.Readiness`): 503 while draining,
        429 while stepping aside as slow (`MRTR_WORKER_STEP_ASIDE`); the body only explains. Redis is reported
        under `tasks` but never makes the worker unready: everything but tasks works without it, and pulling
        every worker out of rotation over a store outage would break the calls that do not need it."""
        aside = worker.engine.stepping_aside()
        if not worker.lifecycle.ready:
            status = Readiness.NOT_READY
        else:
            status = Readiness.STEPPED_ASIDE if aside else Readiness.READY
        body = {"ready": status is Readiness.READY, "slow": aside, "tasks": worker.tasks_health()}
        return JSONResponse(body, status_code=status)

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
