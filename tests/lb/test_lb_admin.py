"""The reserved /lb/ endpoints: health, metrics, and that they are never proxied."""

from __future__ import annotations

import aiohttp

from mrtr_protocol.metrics import MetricsPage

from .standin import MakeBackend, MakeLB, backend_states, jsonrpc_body, wait_until


async def test_metrics_have_per_backend_counters(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a, b = await make_backend("a"), await make_backend("b")
    lb = await make_lb(backends=[a.url, b.url])
    for _ in range(4):
        async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
            await resp.read()

    async with client.get(f"{lb.url}/lb/metrics") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        got = MetricsPage.parse(await resp.text())

    urls = (a.url, b.url)
    assert got.by_label("mrtr_lb_backend_requests_total", "backend") == dict.fromkeys(urls, 2)
    assert got.by_label("mrtr_lb_backend_in_flight", "backend") == dict.fromkeys(urls, 0)
    assert got.by_label("mrtr_lb_backend_healthy", "backend") == dict.fromkeys(urls, 1)
    assert got.by_label("mrtr_lb_backend_drained", "backend") == dict.fromkeys(urls, 0)
    assert got.value("mrtr_lb_responses_total", code="200") == 4
    assert got.value("mrtr_lb_request_duration_seconds_count") == 4
    assert got.value("mrtr_lb_request_duration_seconds_bucket", le="+Inf") == 4


async def test_metrics_count_errors_and_retries(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a, b = await make_backend("a"), await make_backend("b")
    lb = await make_lb(backends=[a.url, b.url], health_interval=3600)
    await a.stop()
    for _ in range(2):
        async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
            assert resp.status == 200

    async with client.get(f"{lb.url}/lb/metrics") as resp:
        got = MetricsPage.parse(await resp.text())
    assert got.value("mrtr_lb_backend_errors_total", backend=a.url, kind="connect") == 1
    assert got.value("mrtr_lb_backend_retries_total", backend=a.url) == 1
    assert got.value("mrtr_lb_backend_requests_total", backend=b.url) == 2


async def test_two_proxies_in_one_process_keep_separate_metrics(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a = await make_backend("a")
    first, second = await make_lb(backends=[a.url]), await make_lb(backends=[a.url])
    async with client.post(f"{first.url}/mcp", data=jsonrpc_body()) as resp:
        await resp.read()
    async with client.get(f"{second.url}/lb/metrics") as resp:
        got = MetricsPage.parse(await resp.text())
    assert got.by_label("mrtr_lb_backend_requests_total", "backend") == {a.url: 0}


async def test_lb_healthz_and_reserved_prefix(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url])
    async with client.get(f"{lb.url}/lb/healthz") as resp:
        assert resp.status == 200
        assert await resp.json() == {"status": "ok", "backends": 1, "eligible": 1}
    async with client.get(f"{lb.url}/lb/nope") as resp:
        assert resp.status == 404
        assert (await resp.json())["error"]["code"] == -32601
    assert a.seen == []  # admin traffic never reaches a worker
    async with client.get(f"{lb.url}/lb/backends") as resp:
        (entry,) = await resp.json()
    assert entry["url"] == a.url
    assert {"state", "in_flight", "requests", "errors", "retries"} <= entry.keys()


async def test_backends_can_be_added_and_removed_at_run_time(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a, b = await make_backend("a"), await make_backend("b")
    lb = await make_lb(backends=[a.url])
    async with client.post(f"{lb.url}/lb/backends/add", params={"url": b.url}) as resp:
        assert resp.status == 200

    async def b_in_rotation() -> bool:
        return bool((await backend_states(client, lb))[b.url]["healthy"])

    await wait_until(b_in_rotation, what="added backend healthy")
    seen = set()
    for _ in range(4):
        async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
            seen.add(resp.headers["X-Worker-Id"])
    assert seen == {"a", "b"}

    async with client.post(f"{lb.url}/lb/backends/remove", params={"url": a.url}) as resp:
        assert resp.status == 200
    assert set(await backend_states(client, lb)) == {b.url}
    async with client.post(f"{lb.url}/lb/backends/remove", params={"url": a.url}) as resp:
        assert resp.status == 404
    async with client.post(f"{lb.url}/lb/backends/add", params={"url": "ftp://nope"}) as resp:
        assert resp.status == 400


async def test_only_the_mcp_path_reaches_the_workers(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url])
    for path in ("/admin/drain", "/metrics", "/readyz"):
        async with client.post(f"{lb.url}{path}") as resp:
            assert resp.status == 404
    async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
        assert resp.status == 200
