"""The proxy's bounds: the upstream connection cap, the read timeout and a graceful stop.

The lean engine drives a request from protocol callbacks and only falls back
to a task to open a connection or wait for a slot; these pin the paths that
fallback and its one periodic read-timeout sweep take.
"""

from __future__ import annotations

import asyncio

import aiohttp

from tests.lb.standin import MakeBackend, MakeLB, StandIn, backend_states, jsonrpc_body, lb_metrics, wait_until

HOLD = {"X-Test-Mode": "hold"}


async def _post(client: aiohttp.ClientSession, url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    async with client.post(f"{url}/mcp", data=jsonrpc_body(), headers=headers or {}) as resp:
        return resp.status, await resp.text()


async def _holding(backend: StandIn, count: int) -> None:
    async def held() -> bool:
        return backend.holding == count

    await wait_until(held, what=f"{count} request(s) held by the backend")


async def test_connection_cap_queues_requests_onto_the_one_connection(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url], max_upstream_connections=1)
    first = asyncio.create_task(_post(client, lb.url, HOLD))
    await _holding(a, 1)
    second = asyncio.create_task(_post(client, lb.url))

    async def both_in_flight() -> bool:
        return bool((await backend_states(client, lb))[a.url]["in_flight"] == 2)

    await wait_until(both_in_flight, what="the second request waiting in the proxy")
    assert len(a.seen) == 1, "the second request must wait for the only upstream connection"
    metrics = await lb_metrics(client, lb)
    assert metrics.by_label("mrtr_lb_backend_in_flight", "backend") == {a.url: 2}
    a.release.set()
    assert (await first)[0] == 200
    assert (await second)[0] == 200
    assert len(a.peers) == 2
    assert a.peers[0] == a.peers[1], "the freed connection is reused, not a new one opened"


async def test_a_backend_silent_past_the_read_timeout_gives_502(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url], read_timeout=0.3)
    status, text = await _post(client, lb.url, HOLD)
    assert status == 502
    assert "upstream failed" in text
    a.release.set()
    assert (await _post(client, lb.url))[0] == 200, "the proxy serves on after a timed-out request"


async def test_stop_lets_a_running_request_finish(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url], shutdown_timeout=30)
    held = asyncio.create_task(_post(client, lb.url, HOLD))
    await _holding(a, 1)
    stopping = asyncio.create_task(lb.stop())

    async def refusing() -> bool:
        try:
            _, writer = await asyncio.open_connection(lb.host, lb.port)
        except OSError:
            return True
        writer.close()
        return False

    await wait_until(refusing, what="the listener closed")
    assert not stopping.done(), "stop must wait for the request still running"
    a.release.set()
    assert (await held)[0] == 200
    await asyncio.wait_for(stopping, 10)
