"""A backend that stops answering (paused, cut off) must not hold the requests it already has.

After `unresponsive_after` health probes in a row without any answer the
proxy answers those requests 504 (the client retries with its last
requestState); it never re-sends them itself, since the backend may have
received them. A backend that answers its probes, even with 503, keeps its
requests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from mrtr_lb import RunningLB
from tests.lb.standin import (
    ADMIN,
    MakeBackend,
    MakeLB,
    StandIn,
    backend_states,
    jsonrpc_body,
    wait_until,
    write_backends,
)

FAST_PROBES = {"health_interval": 0.05, "health_timeout": 0.2}
HOLD = {"X-Test-Mode": "hold"}


async def _post_held(client: aiohttp.ClientSession, url: str, backend: StandIn) -> asyncio.Task[tuple[int, str]]:
    """Start a request the stand-in holds; return once the stand-in has it."""

    async def post() -> tuple[int, str]:
        async with client.post(f"{url}/mcp", data=jsonrpc_body(), headers=HOLD) as resp:
            return resp.status, await resp.text()

    before = backend.holding
    task = asyncio.create_task(post())

    async def held() -> bool:
        return backend.holding > before

    await wait_until(held, what="request held by the backend")
    return task


async def _lb_metric(client: aiohttp.ClientSession, lb: RunningLB, line_start: str) -> float:
    async with client.get(f"{lb.admin_url}/lb/metrics", headers=ADMIN) as resp:
        text = await resp.text()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start))


async def test_requests_on_a_backend_that_stops_answering_get_504(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    frozen = await make_backend("frozen")
    lb = await make_lb(backends=[frozen.url], unresponsive_after=2, **FAST_PROBES)
    request = await _post_held(client, lb.url, frozen)

    frozen.freeze()
    status, text = await asyncio.wait_for(request, 10)

    assert status == 504
    assert "retry with your last requestState" in text
    assert frozen.holding == 1, "the backend never answered: the proxy gave up on it"
    state = (await backend_states(client, lb))[frozen.url]
    assert state["abandoned"] == 1
    assert state["failed_probes"] >= 2
    assert state["in_flight"] == 0
    label = f'mrtr_lb_backend_errors_total{{backend="{frozen.url}",kind="unresponsive"}}'
    assert await _lb_metric(client, lb, label) == 1


async def test_the_client_can_retry_elsewhere_while_the_frozen_backend_holds_its_copy(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    frozen, good = await make_backend("frozen"), await make_backend("good")
    lb = await make_lb(backends=[frozen.url, good.url], unresponsive_after=2, **FAST_PROBES)
    request = await _post_held(client, lb.url, frozen)  # round robin starts with the first backend
    frozen.freeze()
    status, _ = await asyncio.wait_for(request, 10)
    assert status == 504

    async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:  # the client's retry
        assert resp.status == 200
        assert resp.headers["X-Worker-Id"] == "good"
    assert len(frozen.seen) == 1, "the proxy did not re-send the abandoned request"


async def test_with_the_setting_off_a_frozen_backend_keeps_its_request(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    frozen = await make_backend("frozen")
    lb = await make_lb(backends=[frozen.url], unresponsive_after=0, **FAST_PROBES)
    request = await _post_held(client, lb.url, frozen)
    frozen.freeze()

    async def many_failed_probes() -> bool:
        return int((await backend_states(client, lb))[frozen.url]["failed_probes"]) >= 4

    await wait_until(many_failed_probes, what="four probes without an answer")
    assert not request.done()
    frozen.thaw()
    frozen.release.set()
    status, _ = await asyncio.wait_for(request, 10)
    assert status == 200


async def test_a_draining_backend_answers_its_probes_and_keeps_its_requests(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    draining = await make_backend("draining")
    lb = await make_lb(backends=[draining.url], unresponsive_after=1, **FAST_PROBES)
    request = await _post_held(client, lb.url, draining)
    draining.ready = False  # /readyz answers 503
    probes = draining.probes

    async def probed_while_draining() -> bool:
        state = (await backend_states(client, lb))[draining.url]
        return state["state"] == "unhealthy" and draining.probes >= probes + 4

    await wait_until(probed_while_draining, what="several probes answered 503")
    assert not request.done()
    assert (await backend_states(client, lb))[draining.url]["failed_probes"] == 0
    draining.release.set()
    status, _ = await asyncio.wait_for(request, 10)
    assert status == 200


async def _both_healthy(client: aiohttp.ClientSession, lb: RunningLB, urls: set[str]) -> bool:
    states = await backend_states(client, lb)
    return set(states) == urls and all(s["state"] == "healthy" for s in states.values())


async def _listed(client: aiohttp.ClientSession, lb: RunningLB, urls: set[str]) -> bool:
    return set(await backend_states(client, lb)) == urls


async def test_a_removed_backend_is_still_watched_while_requests_run_there(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    # Compose: a container cut off the network also leaves DNS, so discovery removes it at once.
    gone, good = await make_backend("gone"), await make_backend("good")
    listing = tmp_path / "backends"
    write_backends(listing, [gone.url, good.url])
    lb = await make_lb(backends_file=listing, unresponsive_after=2, **FAST_PROBES)
    await wait_until(lambda: _both_healthy(client, lb, {gone.url, good.url}), what="both backends in rotation")
    request = await _post_held(client, lb.url, gone)
    write_backends(listing, [good.url])
    await wait_until(lambda: _listed(client, lb, {good.url}), what="the backend removed from the file dropped")
    gone.freeze()

    status, _ = await asyncio.wait_for(request, 10)
    assert status == 504
    assert gone.url not in await backend_states(client, lb)


async def test_a_stream_whose_backend_stops_answering_is_cut(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    # Headers already went out, so no 504 can follow: the cut connection is the signal (as for a broken upstream).
    frozen = await make_backend("frozen")
    lb = await make_lb(backends=[frozen.url], unresponsive_after=2, **FAST_PROBES)
    async with client.post(f"{lb.url}/mcp", data=jsonrpc_body(), headers={"X-Test-Mode": "sse"}) as resp:
        assert resp.status == 200
        await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 10)
        frozen.freeze()
        try:
            await asyncio.wait_for(resp.content.read(), 10)
            outcome = "complete"
        except aiohttp.ClientPayloadError:
            outcome = "cut"
    assert outcome == "cut"
    assert not frozen.sse_gate.is_set(), "the backend never sent the rest"
    assert (await backend_states(client, lb))[frozen.url]["abandoned"] == 1
