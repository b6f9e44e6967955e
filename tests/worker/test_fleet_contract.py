"""The worker's side of its contract with the proxy (`mrtr_protocol.fleet`), in process (ASGI).

Ready, draining and stepping aside are each told by `/readyz`'s status alone; the rebalance hook is at the
contract's path, wants the operator's token and answers how many calls it moved. The proxy's side, against a
stand-in that answers the same statuses, is `tests/lb/test_lb_fleet_contract.py`; the count on a worker with a
queue, `tests/worker/admin/test_admin_rebalance.py`.
"""

from __future__ import annotations

import time

import httpx
import pytest
from pydantic import SecretStr

from mrtr_protocol.fleet import READINESS_PATH, REBALANCE_METHOD, REBALANCE_PATH, Readiness, moved_by
from mrtr_worker.app import create_app
from mrtr_worker.compute.policy import SheddingSettings
from mrtr_worker.config import WorkerSettings
from mrtr_worker.edge.front_door import FrontDoor
from mrtr_worker.sealing.keyring import new_ring
from mrtr_worker.sealing.layout import Pace

TOKEN = "fleet-contract-operator-token"
TOOL = "count_primes"


def _app(*, step_aside: bool) -> FrontDoor:
    return create_app(
        WorkerSettings(
            instance_id="w-contract",
            keyring=SecretStr(new_ring("contract-1").dumps()),
            allow_anonymous=True,
            tool_packs=["compute"],
            shedding=SheddingSettings(step_aside=step_aside),
            admin_token=SecretStr(TOKEN),
        )
    )


@pytest.fixture
def app() -> FrontDoor:
    return _app(step_aside=True)


def _http(app: FrontDoor) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000")


def _judged_slow(app: FrontDoor) -> None:
    """What serving slow slices among fast peers teaches the engine: its own rate a quarter of theirs, the newest
    slice a minute ahead of now so no probe is due while the test runs (it then stays aside)."""
    standing, later = app.state.worker.engine.standing, time.monotonic() + 60
    for _ in range(3):
        standing.observe(TOOL, steps=1, elapsed_ms=400, now=later)
        standing.bring(TOOL, Pace(rate=10.0, samples=2), peer=True, now=later)


async def test_ready_is_200(app: FrontDoor) -> None:
    async with _http(app) as http:
        assert (await http.get(READINESS_PATH)).status_code == Readiness.READY


async def test_draining_is_503_and_back_to_200_on_undrain(app: FrontDoor) -> None:
    lifecycle = app.state.worker.lifecycle
    async with _http(app) as http:
        lifecycle.drain()
        assert (await http.get(READINESS_PATH)).status_code == Readiness.NOT_READY
        lifecycle.undrain()
        assert (await http.get(READINESS_PATH)).status_code == Readiness.READY


async def test_stepping_aside_is_429_and_a_drain_still_says_503(app: FrontDoor) -> None:
    _judged_slow(app)
    assert app.state.worker.engine.stepping_aside()
    async with _http(app) as http:
        assert (await http.get(READINESS_PATH)).status_code == Readiness.STEPPED_ASIDE
        app.state.worker.lifecycle.drain()  # leaving for good: its return would be capacity, not a probe round
        assert (await http.get(READINESS_PATH)).status_code == Readiness.NOT_READY


async def test_a_worker_that_does_not_step_aside_stays_ready_however_slow() -> None:
    app = _app(step_aside=False)
    _judged_slow(app)
    async with _http(app) as http:
        assert (await http.get(READINESS_PATH)).status_code == Readiness.READY


async def test_the_rebalance_hook_wants_the_operator_token_and_answers_calls_moved(app: FrontDoor) -> None:
    async with _http(app) as http:
        refused = await http.request(REBALANCE_METHOD, REBALANCE_PATH)
        wrong = await http.request(REBALANCE_METHOD, REBALANCE_PATH, headers={"Authorization": "Bearer nope"})
        answer = await http.request(REBALANCE_METHOD, REBALANCE_PATH, headers={"Authorization": f"Bearer {TOKEN}"})
    assert (refused.status_code, wrong.status_code) == (401, 401)
    assert answer.status_code == 200
    assert moved_by(answer.json()) == 0  # idle: nothing queued, nothing moved
    counted = app.state.worker.metrics.registry.get_sample_value("mrtr_worker_rebalances_total")
    assert counted == 1  # only the authorized call reached the worker
