"""Authentication across the fleet: a token's principal holds on every instance a call hops to.

A computation is handed back several times through the proxy (short time
slices), so its state is opened by instances other than the one that sealed
it, each checking the same principal.
"""

from __future__ import annotations

import httpx
import pytest

from mrtr_client import AsyncClient, AuthenticationFailed
from mrtr_ops.fleet import AdminError, admin_call
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.local.fleet import LocalFleet
from mrtr_worker.compute import primes


@pytest.fixture(scope="module")
def secured(secured_cluster: LocalCluster) -> LocalCluster:
    return secured_cluster


async def test_a_hopping_computation_keeps_its_principal_on_every_instance(secured: LocalCluster) -> None:
    async with AsyncClient(secured.mcp_url, token=secured.issuer.mint("alice")) as client:
        done = await client.call_tool("count_primes", {"limit": 100_000_000, "segment": 1_000_000})
    assert done.structured == {"count": primes.KNOWN_COUNTS[100_000_000]}
    instances = {hop.instance for hop in done.trace.hops if hop.instance}
    assert len(instances) >= 2, done.trace.hops


async def test_the_proxy_passes_a_refusal_through_unretried(secured: LocalCluster) -> None:
    async with AsyncClient(secured.mcp_url) as client:
        with pytest.raises(AuthenticationFailed) as caught:
            await client.call_tool("echo", {"text": "anonymous"})
    assert caught.value.http_status == 401


def test_fleet_operations_carry_the_operator_token(secured: LocalCluster) -> None:
    worker = LocalFleet(secured).workers()[0]
    assert admin_call(worker, "GET", "/admin/state")["version"] == 1
    unauthenticated = httpx.get(f"{worker.admin_url}/admin/state")
    assert unauthenticated.status_code == 401
    with pytest.raises(AdminError, match="401"):
        admin_call(type(worker)(worker.instance_id, worker.version, worker.admin_url), "GET", "/admin/state")
