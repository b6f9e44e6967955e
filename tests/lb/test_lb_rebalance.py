"""Rebalance on join: capacity that joins the rotation makes the proxy POST /admin/rebalance to the others.

Real workers (a local cluster with an operator token, one compute slot each) receive the calls; what
they counted (`mrtr_worker_rebalances_total`) is the evidence. The joining backend is a stand-in: it
only has to pass its health check. One cluster serves the module.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from mrtr_client import AsyncClient, CallResult
from mrtr_lb import RunningLB
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.metrics_page import MetricsPage
from mrtr_ops.waiting import wait_until as wait_until_sync
from mrtr_worker.compute import primes
from tests.lb.standin import (
    ADMIN_TOKEN,
    MakeBackend,
    MakeLB,
    backend_states,
    jsonrpc_body,
    lb_metrics,
    wait_until,
    write_backends,
)

pytestmark = pytest.mark.slow

TOKEN = ADMIN_TOKEN
"""The workers' admin token is the test proxies' operator token: one fleet token, as in compose."""
REBALANCES = "mrtr_worker_rebalances_total"
LIMIT = 100_000_000
SEGMENT = 2_500_000
CALLS = 4
"""Four calls of about a second each (more on a busy machine) behind one slot: some are still queued at the join."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One worker with one compute slot and shedding on (the default), behind the cluster's own proxy."""
    config = ClusterConfig(
        workers=1,
        port=0,
        work_dir=tmp_path_factory.mktemp("rebalance"),
        admin_token=TOKEN,
        redis=False,
        worker_env={"MRTR_WORKER_MAX_CONCURRENT_COMPUTATIONS": "1"},
        ready_timeout=120.0,
    )
    with LocalCluster(config) as started:
        yield started


async def _rebalances(client: aiohttp.ClientSession, url: str) -> float:
    async with client.get(f"{url}/metrics") as resp:
        return MetricsPage.parse(await resp.text()).value(REBALANCES)


async def _lb_rebalance(client: aiohttp.ClientSession, lb: RunningLB, outcome: str) -> float:
    return (await lb_metrics(client, lb)).value("mrtr_lb_rebalance_total", outcome=outcome)


async def _proxy(
    make_lb: MakeLB, client: aiohttp.ClientSession, listing: Path, urls: list[str], **overrides: object
) -> RunningLB:
    """A proxy that discovers its backends in ``listing`` (the way the local cluster's joins work), all in rotation."""
    write_backends(listing, urls)
    lb = await make_lb(backends_file=listing, wait=False, **overrides)

    async def all_in() -> bool:
        states = await backend_states(client, lb)
        return set(states) == set(urls) and all(s["state"] == "healthy" for s in states.values())

    await wait_until(all_in, what="the start-up set in rotation")
    return lb


async def _add(client: aiohttp.ClientSession, lb: RunningLB, listing: Path, urls: list[str], url: str) -> None:
    """Discovery finds one more backend (``url`` added to the file's ``urls``); return once it is in rotation."""
    write_backends(listing, [*urls, url])

    async def in_rotation() -> bool:
        return (await backend_states(client, lb)).get(url, {}).get("state") == "healthy"

    await wait_until(in_rotation, what=f"{url} in rotation")


async def test_a_backend_added_makes_the_proxy_rebalance_the_others_and_a_failing_one_stops_nothing(
    cluster: LocalCluster, make_lb: MakeLB, make_backend: MakeBackend, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    workers = [h.url for h in cluster.workers.values()]
    failing = await make_backend("no-admin")  # routable, but its /admin/rebalance is a 404
    joiner = await make_backend("joiner")
    listing = tmp_path / "backends"
    lb = await _proxy(make_lb, client, listing, [*workers, failing.url], rebalance_debounce=0.05)
    before = {url: await _rebalances(client, url) for url in workers}
    assert await _lb_rebalance(client, lb, "ok") == 0, "the start-up set is not a join"

    await _add(client, lb, listing, [*workers, failing.url], joiner.url)

    async def every_worker_told() -> bool:
        return {url: await _rebalances(client, url) for url in workers} == {url: n + 1 for url, n in before.items()}

    await wait_until(every_worker_told, what="each worker counted one rebalance")
    await wait_until(lambda: _refused_once(client, lb), what="the failing backend's call counted")
    assert await _lb_rebalance(client, lb, "ok") == len(workers)


async def _refused_once(client: aiohttp.ClientSession, lb: RunningLB) -> bool:
    return await _lb_rebalance(client, lb, "refused") == 1


async def test_joins_close_together_make_one_round_and_a_recovery_is_a_join(
    cluster: LocalCluster, make_lb: MakeLB, make_backend: MakeBackend, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    workers = [h.url for h in cluster.workers.values()]
    first, second = await make_backend("first"), await make_backend("second")
    listing = tmp_path / "backends"
    lb = await _proxy(make_lb, client, listing, workers, rebalance_debounce=1.0)
    before = {url: await _rebalances(client, url) for url in workers}

    write_backends(listing, [*workers, first.url])
    # Both join within one probe interval (0.05 s) of each other.
    await _add(client, lb, listing, [*workers, first.url], second.url)

    async def told(times: int) -> bool:
        return {url: await _rebalances(client, url) for url in workers} == {u: n + times for u, n in before.items()}

    await wait_until(lambda: told(1), what="one round for both joins")
    # The joiners are not told of each other: one round went to the workers alone.
    assert await _lb_rebalance(client, lb, "ok") == len(workers)
    assert await _lb_rebalance(client, lb, "refused") == 0

    first.ready = False  # out of rotation, then back: capacity appeared again

    async def out_of_rotation() -> bool:
        return bool((await backend_states(client, lb))[first.url]["state"] == "unhealthy")

    await wait_until(out_of_rotation, what="the stand-in out of rotation")
    first.ready = True
    await wait_until(lambda: told(2), what="a second round after the recovery")
    assert await _lb_rebalance(client, lb, "refused") == 1, "the other stand-in was told too (it has no /admin)"


async def test_without_the_token_the_workers_refuse_and_nothing_moves(
    cluster: LocalCluster,
    make_lb: MakeLB,
    make_backend: MakeBackend,
    client: aiohttp.ClientSession,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without a token the proxy's admin API is off too, so the join and the refusal are seen from outside."""
    caplog.set_level(logging.INFO, logger="mrtr_lb.rebalance")
    workers = [h.url for h in cluster.workers.values()]
    joiner = await make_backend("joiner")
    listing = tmp_path / "backends"
    write_backends(listing, workers)
    lb = await make_lb(backends_file=listing, admin_token=None, rebalance_debounce=0.05, wait=False)
    before = {url: await _rebalances(client, url) for url in workers}

    async def served_by_a_worker() -> bool:
        async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
            return resp.status != 503

    await wait_until(served_by_a_worker, what="the workers in rotation")
    write_backends(listing, [*workers, joiner.url])

    async def joiner_serves() -> bool:
        await served_by_a_worker()
        return bool(joiner.seen)

    await wait_until(joiner_serves, what="the joiner in rotation")

    def turned_off() -> bool:
        return any("rebalance on join is OFF" in r.getMessage() for r in caplog.records)

    await wait_until(lambda: _async(turned_off()), what="the workers' 401s turned the feature off")
    assert {url: await _rebalances(client, url) for url in workers} == before


async def _async(value: bool) -> bool:
    return value


async def test_with_rebalance_on_join_off_no_call_is_made(
    cluster: LocalCluster, make_lb: MakeLB, make_backend: MakeBackend, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    workers = [h.url for h in cluster.workers.values()]
    joiner = await make_backend("joiner")
    listing = tmp_path / "backends"
    lb = await _proxy(make_lb, client, listing, workers, rebalance_on_join=False, rebalance_debounce=0)
    before = {url: await _rebalances(client, url) for url in workers}

    await _add(client, lb, listing, workers, joiner.url)
    # Off, no round is ever scheduled (nothing listens for joins); with it on and no debounce, the round
    # is a task started by the very health verdict that put the joiner in rotation. Give it a moment.
    await asyncio.sleep(0.3)

    assert [await _lb_rebalance(client, lb, outcome) for outcome in ("ok", "unauthorized", "refused")] == [0, 0, 0]
    assert {url: await _rebalances(client, url) for url in workers} == before


async def test_scale_out_under_overload_a_queued_call_finishes_on_the_new_worker(cluster: LocalCluster) -> None:
    """One slot, long calls queued behind it; the new worker joining (no operator call) moves them on.

    The new worker is started first and joins once calls are queued, so the test does not depend on
    how long a worker takes to start on a busy machine.
    """
    old = next(iter(cluster.workers))
    told_before = cluster.worker_metric(old, REBALANCES)
    new = await asyncio.to_thread(cluster.start_worker)
    async with AsyncClient(cluster.mcp_url) as mcp:
        running: list[asyncio.Task[CallResult]] = [
            asyncio.create_task(mcp.call_tool("count_primes", {"limit": LIMIT, "segment": SEGMENT}))
            for _ in range(CALLS)
        ]
        await asyncio.to_thread(
            wait_until_sync,
            lambda: cluster.worker_metric(old, "mrtr_worker_in_flight_requests") >= 2,
            timeout=60,
            what="calls queued on the only worker",
        )
        await asyncio.to_thread(cluster.join_worker, new)
        results = await asyncio.gather(*running)

    assert all(done.structured == {"count": primes.KNOWN_COUNTS[LIMIT]} for done in results)
    finished_on = [done.trace.instances[-1] for done in results]
    assert new.instance_id in finished_on, [done.trace.instances for done in results]
    assert cluster.worker_metric(old, REBALANCES) == told_before + 1, "the proxy told the old worker, once"
