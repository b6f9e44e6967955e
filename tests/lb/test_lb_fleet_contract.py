"""The proxy's side of its contract with a worker (`mrtr_protocol.fleet`), against in-process stand-ins.

The proxy acts on `/readyz`'s status and nothing else: a body that says the opposite changes nothing. A
rebalance answer is read for the calls it moved; one outside the contract is counted as refused. The
worker's side, against the real worker, is `tests/worker/test_fleet_contract.py`.
"""

from __future__ import annotations

import json

import aiohttp
import pytest

from mrtr_protocol.fleet import Readiness, rebalance_answer
from tests.lb.standin import MakeBackend, MakeLB, admin_call, backend_states, lb_metrics, wait_until

MISLEADING = json.dumps({"ready": True, "slow": True}).encode()
"""A body that would fool a proxy reading it: ready, and slow."""


@pytest.mark.parametrize(
    ("ready", "slow", "verdict"),
    [
        (False, False, ("unhealthy", False)),  # 503: draining; its return is a join
        (False, True, ("unhealthy", True)),  # 429: stepped aside; its return is no join
    ],
)
async def test_the_readiness_status_alone_decides_the_verdict(
    ready: bool,
    slow: bool,
    verdict: tuple[str, bool],
    make_backend: MakeBackend,
    make_lb: MakeLB,
    client: aiohttp.ClientSession,
) -> None:
    a, b = await make_backend("a"), await make_backend("b")
    a.readyz_body = b.readyz_body = MISLEADING
    lb = await make_lb(backends=[a.url, b.url])
    assert (await backend_states(client, lb))[a.url]["aside"] is False  # 200 whatever the body says

    a.ready, a.slow = ready, slow

    async def judged() -> bool:
        state = (await backend_states(client, lb))[a.url]
        return (state["state"], state["aside"]) == verdict

    await wait_until(judged, what=f"the verdict {verdict}")
    expected = Readiness.STEPPED_ASIDE if slow else Readiness.NOT_READY
    assert (await backend_states(client, lb))[a.url]["last_error"] == f"/readyz answered {expected.value}"


@pytest.mark.parametrize("status", [404, 500, 302])
async def test_any_other_status_is_out_of_rotation_not_aside(
    status: int, make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    assert Readiness.of(status) is Readiness.NOT_READY
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url], health_path=f"/status/{status}", wait=False)

    async def out() -> bool:
        state = (await backend_states(client, lb))[a.url]
        return bool(state["last_error"] == f"/status/{status} answered {status}" and not state["aside"])

    await wait_until(out, what=f"{status} read as not ready")
    assert (await backend_states(client, lb))[a.url]["state"] == "unhealthy"


async def test_a_rebalance_answer_is_read_for_the_calls_it_moved(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    keeper, other, joiner = await make_backend("keeper"), await make_backend("other"), await make_backend("joiner")
    keeper.rebalance_answer = rebalance_answer(3)
    other.rebalance_answer = {"rebalanced": 3}  # the answer before the contract: calls waiting, not moved
    lb = await make_lb(backends=[keeper.url, other.url, joiner.url], rebalance_debounce=0)
    assert (await admin_call(client, lb, "drain", joiner.url))[0] == 200
    assert (await admin_call(client, lb, "undrain", joiner.url))[0] == 200  # capacity joined

    async def both_answered() -> bool:
        page = await lb_metrics(client, lb)
        return (
            page.value("mrtr_lb_rebalance_total", outcome="ok")
            + page.value("mrtr_lb_rebalance_total", outcome="refused")
            == 2
        )

    await wait_until(both_answered, what="both rebalance answers counted")
    page = await lb_metrics(client, lb)
    assert page.value("mrtr_lb_rebalance_total", outcome="ok") == 1
    assert page.value("mrtr_lb_rebalance_total", outcome="refused") == 1
    assert page.value("mrtr_lb_rebalance_moved_total") == 3
    assert (keeper.rebalances, other.rebalances, joiner.rebalances) == (1, 1, 0)


@pytest.mark.parametrize(("status", "state"), [(404, "healthy"), (429, "healthy"), (503, "unhealthy")])
async def test_the_http_check_for_any_server_reads_under_500_as_ready(
    status: int, state: str, make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    """`MRTR_LB_HEALTH_CHECK=http`, for servers outside the contract: no status has the contract's meaning."""
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url], health_check="http", health_path=f"/status/{status}", wait=False)

    async def judged() -> bool:
        entry = (await backend_states(client, lb))[a.url]
        why = None if state == "healthy" else f"/status/{status} answered {status}"
        return bool(entry["state"] == state and entry["last_error"] == why and not entry["aside"])

    await wait_until(judged, what=f"{status} read as {state}")
