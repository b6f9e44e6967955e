"""The operator's `/admin/...` endpoints of one worker: drain, state format, key ring reload, task reseal.

Every route requires the operator's token when one is configured
(`mrtr_worker.admin.guard`); the proxy never forwards `/admin`, so they are
reachable only on the worker's own port.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import TYPE_CHECKING

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError

from mrtr_protocol.fleet import REBALANCE_PATH, rebalance_answer
from mrtr_worker.admin.guard import AdminGuard
from mrtr_worker.sealing.keyring import KeyRing, KeyRingError
from mrtr_worker.tasks.store import ResealCounts

if TYPE_CHECKING:
    from mrtr_worker.worker import Worker

logger = logging.getLogger("mrtr_worker.app")
"""The host's logger, as before the routes moved here: operators grep for these lines."""


def admin_router(worker: Worker) -> APIRouter:
    """The admin routes bound to one worker, behind its admin token guard."""
    settings = worker.settings
    admin = APIRouter(dependencies=[Depends(AdminGuard(settings.admin_token_text()))])

    @admin.post("/admin/drain")
    async def drain() -> dict[str, object]:
        """Readiness turns false, computations hand back at their next step, the process exits once idle."""
        worker.drain()
        return {"draining": True, "in_flight": worker.lifecycle.busy_requests}

    @admin.post(REBALANCE_PATH)
    async def rebalance() -> dict[str, int]:
        """Capacity was added elsewhere (a scale-out): calls queued here for a slot move on (`compute.policy`).

        The answer (`mrtr_protocol.fleet`) counts the calls that left the queue, not those that were waiting:
        one the policy keeps (no move left, shedding off) stays and is not counted."""
        return rebalance_answer(await worker.lifecycle.rebalance().moved())

    @admin.get("/admin/state")
    async def state_policy() -> dict[str, object]:
        """What this instance reads and writes: state formats and keys (names only, never secrets)."""
        layout, ring = worker.identity.layout, worker.codec.ring
        return {
            "version": worker.identity.version,
            "readable_formats": sorted(layout.readable),
            "write_format": layout.write_format,
            "keys": ring.sealing_names(),
            "primary_key": ring.primary,
            "state_ttl_seconds": settings.state_ttl_seconds,
            "task_store": worker.tasks is not None,
        }

    @admin.post("/admin/state-format")
    async def set_state_format(write: int) -> JSONResponse:
        """Contract (or expand back) the state layout this instance writes."""
        try:
            worker.identity.layout.set_write_format(write)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        logger.info("now writing state format %s", write)
        return JSONResponse(await state_policy())

    @admin.post("/admin/keyring/reload")
    async def reload_keyring() -> JSONResponse:
        """Re-read the key ring file (a rotation step); on any problem the current ring stays."""
        if settings.keyring_file is None:
            return JSONResponse({"error": "the ring comes from MRTR_WORKER_KEYRING; restart to change it"}, 409)
        try:
            ring = KeyRing.parse(settings.keyring_file.read_text())
        except (KeyRingError, OSError) as exc:
            return JSONResponse({"error": f"key ring not reloaded: {exc}"}, status_code=409)
        worker.codec.use_ring(ring)
        logger.info("key ring reloaded: keys %s, primary %s", ring.sealing_names(), ring.primary)
        return JSONResponse(await state_policy())

    @admin.post("/admin/tasks/reseal")
    async def reseal_tasks() -> JSONResponse:
        """Re-seal every task record under the primary key (a rotation step, before the old key retires)."""
        if worker.tasks is None:
            return JSONResponse({"error": "this worker has no task store (no Redis URL configured)"}, 409)
        try:
            counts: ResealCounts = await worker.tasks.store.reseal_all()
        except RedisError as exc:
            logger.warning("task reseal: task store unavailable: %s", exc)
            return JSONResponse({"error": f"task store unavailable, nothing resealed: {exc}"}, status_code=503)
        return JSONResponse(asdict(counts))

    @admin.post("/admin/undrain")
    async def undrain() -> dict[str, bool]:
        worker.lifecycle.undrain()
        worker.metrics.ready.set(1)
        return {"draining": False}

    return admin
