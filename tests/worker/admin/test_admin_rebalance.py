"""`POST /admin/rebalance` on a real worker: the operator's word that capacity was added elsewhere."""

from __future__ import annotations

import httpx

from mrtr_ops.local.process import WorkerSpec


def test_a_rebalance_answers_how_many_calls_it_moved_and_keeps_the_worker_in_service(worker: WorkerSpec) -> None:
    response = httpx.post(f"{worker.url}/admin/rebalance", timeout=10)
    assert response.status_code == 200, response.text
    assert response.json() == {"rebalanced": 0}  # idle: nobody queued for a slot
    assert httpx.get(f"{worker.url}/readyz", timeout=10).status_code == 200  # not a drain
