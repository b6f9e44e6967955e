"""The admin API on its own listener: health, metrics, drain; the operator token; nothing of it on the public door."""

from __future__ import annotations

import logging

import aiohttp
import pytest

from tests.lb.standin import ADMIN, MakeBackend, MakeLB, admin_call, backend_states, jsonrpc_body, lb_metrics

ADMIN_PATHS = [
    ("GET", "/lb/backends"),
    ("GET", "/lb/metrics"),
    ("GET", "/lb/healthz"),
    ("POST", "/lb/backends/drain"),
    ("POST", "/lb/backends/undrain"),
    ("POST", "/lb/backends/add"),
    ("POST", "/lb/backends/remove"),
    ("GET", "/lb/nope"),
    ("GET", "/lb"),
]


async def test_metrics_have_per_backend_counters(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a, b = await make_backend("a"), await make_backend("b")
    lb = await make_lb(backends=[a.url, b.url])
    for _ in range(4):
        async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
            await resp.read()

    got = await lb_metrics(client, lb)

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

    got = await lb_metrics(client, lb)
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
    got = await lb_metrics(client, second)
    assert got.by_label("mrtr_lb_backend_requests_total", "backend") == {a.url: 0}


async def test_the_admin_listener_lists_the_pool_and_reserves_its_prefix(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url])
    assert lb.admin_port != lb.port
    async with client.get(f"{lb.admin_url}/lb/healthz") as resp:  # the probe needs no token
        assert resp.status == 200
        assert await resp.json() == {"status": "ok", "backends": 1, "eligible": 1}
    async with client.get(f"{lb.admin_url}/lb/nope", headers=ADMIN) as resp:
        assert resp.status == 404
        assert (await resp.json())["error"]["code"] == -32601
    async with client.post(f"{lb.admin_url}/mcp", data=jsonrpc_body(), headers=ADMIN) as resp:
        assert resp.status == 404, "the admin listener forwards nothing"
    assert a.seen == []  # admin traffic never reaches a worker
    (entry,) = (await backend_states(client, lb)).values()
    assert entry["url"] == a.url
    assert entry["source"] == "static"
    assert {"state", "in_flight", "requests", "errors", "retries"} <= entry.keys()


async def test_nothing_under_lb_is_served_on_the_public_listener_with_or_without_the_token(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url])
    for method, path in ADMIN_PATHS:
        for headers in ({}, ADMIN):
            async with client.request(method, f"{lb.url}{path}", params={"url": a.url}, headers=headers) as resp:
                assert resp.status == 404, (method, path, headers)
                assert "is not served through this proxy" in (await resp.json())["error"]["message"]
    assert a.seen == []
    assert (await backend_states(client, lb))[a.url]["state"] == "healthy", "nothing was drained"


async def test_the_admin_listener_refuses_without_the_operator_token(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url])
    for method, path in ADMIN_PATHS:
        if (method, path) == ("GET", "/lb/healthz"):
            continue
        for authorization in (None, "Bearer wrong-token", "Basic " + "x" * 8, "Bearer", "", "bearer  " + "y"):
            headers = {} if authorization is None else {"Authorization": authorization}
            async with client.request(method, f"{lb.admin_url}{path}", params={"url": a.url}, headers=headers) as resp:
                assert resp.status == 401, (method, path, authorization)
                body = await resp.json()
            assert body == {"error": "the operator's bearer token is required"}, "no listing, no metrics, no hint"
    assert (await backend_states(client, lb))[a.url]["state"] == "healthy", "nothing was drained"


async def test_without_a_configured_token_the_admin_api_is_off(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url], admin_token=None, wait=False)
    for headers in ({}, ADMIN, {"Authorization": "Bearer "}):
        async with client.get(f"{lb.admin_url}/lb/backends", headers=headers) as resp:
            assert resp.status == 403
            assert "MRTR_LB_ADMIN_TOKEN" in (await resp.json())["error"]
    async with client.get(f"{lb.admin_url}/lb/healthz") as resp:
        assert resp.status == 200


async def test_there_is_no_add_or_remove(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    """Only the configured discovery adds a backend: not even the operator's token puts a listener in rotation."""
    a, foreign = await make_backend("a"), await make_backend("foreign")
    lb = await make_lb(backends=[a.url])
    for action in ("add", "remove"):
        status, _ = await admin_call(client, lb, action, foreign.url if action == "add" else a.url)
        assert status == 404
    assert set(await backend_states(client, lb)) == {a.url}
    for _ in range(3):
        async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
            assert resp.headers["X-Worker-Id"] == "a"
    assert foreign.seen == []


async def test_admin_actions_are_logged_with_the_caller(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    a = await make_backend("a")
    lb = await make_lb(backends=[a.url])
    caplog.set_level(logging.INFO, logger="mrtr_lb.admin")
    assert (await admin_call(client, lb, "drain", a.url))[0] == 200
    async with client.post(f"{lb.admin_url}/lb/backends/undrain", params={"url": a.url}) as resp:
        assert resp.status == 401
    lines = [r.getMessage() for r in caplog.records if r.name == "mrtr_lb.admin"]
    assert f"admin POST '/lb/backends/drain' url='{a.url}' from 127.0.0.1 -> 200" in lines
    assert f"admin POST '/lb/backends/undrain' url='{a.url}' from 127.0.0.1 -> 401" in lines
    assert all("lb-test-operator-token" not in line for line in lines), "the token is never logged"


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
