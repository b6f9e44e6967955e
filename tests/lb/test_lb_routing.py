"""Who gets the request: round robin, health, passive ejection, drain."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

import aiohttp

from mrtr_lb import RunningLB
from tests.lb.standin import MakeBackend, MakeLB, StandIn, admin_call, backend_states, jsonrpc_body, wait_until


async def post_mcp(client: aiohttp.ClientSession, url: str, **headers: str) -> tuple[int, str | None]:
    async with client.post(f"{url}/mcp", data=jsonrpc_body(), headers=headers) as resp:
        await resp.read()
        return resp.status, resp.headers.get("X-Worker-Id")


async def test_round_robin_spreads_evenly(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    backends = [await make_backend(f"w{i}") for i in range(3)]
    lb = await make_lb(backends=[b.url for b in backends])

    seen = Counter([(await post_mcp(client, lb.url))[1] for _ in range(30)])

    assert seen == {"w0": 10, "w1": 10, "w2": 10}
    assert [len(b.seen) for b in backends] == [10, 10, 10]


async def test_unready_backend_leaves_rotation_and_returns(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a, b = await make_backend("a"), await make_backend("b")
    lb = await make_lb(backends=[a.url, b.url])

    b.ready = False

    async def b_is(state: str) -> bool:
        return bool((await backend_states(client, lb))[b.url]["state"] == state)

    await wait_until(lambda: b_is("unhealthy"), what="b out of rotation")
    workers = {(await post_mcp(client, lb.url))[1] for _ in range(6)}
    assert workers == {"a"}

    b.ready = True
    await wait_until(lambda: b_is("healthy"), what="b back in rotation")
    workers = {(await post_mcp(client, lb.url))[1] for _ in range(6)}
    assert workers == {"a", "b"}


async def test_a_backend_stepping_aside_as_slow_leaves_rotation_and_says_why(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    """A worker's `/readyz` 429 (`MRTR_WORKER_STEP_ASIDE`, `mrtr_protocol.fleet`): out of rotation, marked aside."""
    a, b, c = await make_backend("a"), await make_backend("b"), await make_backend("c")
    lb = await make_lb(backends=[a.url, b.url, c.url])
    b.slow, b.ready = True, False

    async def b_aside() -> bool:
        state = (await backend_states(client, lb))[b.url]
        return bool(state["state"] == "unhealthy" and state["aside"] and state["last_error"] == "/readyz answered 429")

    await wait_until(b_aside, what="b stepped aside")
    seen = Counter([(await post_mcp(client, lb.url))[1] for _ in range(12)])
    assert seen == {"a": 6, "c": 6}, "its share spreads: the one after it in the pool takes no double share"

    b.ready = True

    async def b_back() -> bool:
        return bool((await backend_states(client, lb))[b.url]["state"] == "healthy")

    await wait_until(b_back, what="b back in rotation")
    back = (await backend_states(client, lb))[b.url]
    assert (back["last_error"], back["aside"]) == (None, False)


async def test_stopped_backend_is_skipped_without_failures(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    backends = [await make_backend(f"w{i}") for i in range(3)]
    # Health checks effectively off after the first round: only passive ejection can help.
    lb = await make_lb(backends=[b.url for b in backends], health_interval=3600)
    dead = backends[1]
    await dead.stop()

    results = [await post_mcp(client, lb.url) for _ in range(12)]

    assert all(status == 200 for status, _ in results), results
    assert {worker for _, worker in results} == {"w0", "w2"}
    state = (await backend_states(client, lb))[dead.url]
    assert state["state"] == "unhealthy"
    assert state["retries"] == 1
    assert "connect failed" in state["last_error"]


async def test_no_backend_gives_503_with_retry_after(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url], retry_after=3)
    a.ready = False
    await wait_until(
        lambda: _state_is(client, lb, a.url, "unhealthy"),
        what="a out of rotation",
    )

    async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
        assert resp.status == 503
        assert resp.headers["Retry-After"] == "3"
        body = await resp.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] == 1  # the request's own id, as MCP's schema wants
    assert body["error"]["code"] == -32603
    assert "no backend" in body["error"]["message"]


async def test_all_backends_refusing_gives_503(make_lb: MakeLB, client: aiohttp.ClientSession) -> None:
    # Nothing listens there; the first health round marks it down before any request.
    lb = await make_lb(backends=["http://127.0.0.1:1"], wait=False)
    async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
        assert resp.status == 503
        assert "Retry-After" in resp.headers
        assert "Traceback" not in await resp.text()


async def test_drain_and_undrain(make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession) -> None:
    a, b = await make_backend("a"), await make_backend("b")
    lb = await make_lb(backends=[a.url, b.url])

    # A request that stays open on whichever backend gets it.
    held = asyncio.create_task(post_mcp(client, lb.url, **{"X-Test-Mode": "hold"}))
    await wait_until(_any_holding(a, b), what="request in flight")
    busy, idle = (a, b) if a.holding else (b, a)

    status, entry = await admin_call(client, lb, "drain", busy.url)
    assert (status, entry["state"]) == (200, "drained")
    states = await backend_states(client, lb)
    assert states[busy.url]["state"] == "drained"
    assert states[busy.url]["in_flight"] == 1

    workers = {(await post_mcp(client, lb.url))[1] for _ in range(6)}
    assert workers == {idle.worker_id}

    busy.release.set()
    assert await held == (200, busy.worker_id)  # in-flight work finishes on the drained backend

    status, entry = await admin_call(client, lb, "undrain", busy.url)
    assert (status, entry["state"]) == (200, "healthy")
    workers = {(await post_mcp(client, lb.url))[1] for _ in range(6)}
    assert workers == {"a", "b"}


async def test_drain_unknown_backend_is_404(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url])
    assert (await admin_call(client, lb, "drain", "http://127.0.0.1:1"))[0] == 404
    assert (await admin_call(client, lb, "drain", "ftp://x"))[0] == 400


async def _state_is(client: aiohttp.ClientSession, lb: RunningLB, backend_url: str, state: str) -> bool:
    entry = (await backend_states(client, lb)).get(backend_url)
    return entry is not None and entry["state"] == state


def _any_holding(*backends: StandIn) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return any(b.holding for b in backends)

    return check
