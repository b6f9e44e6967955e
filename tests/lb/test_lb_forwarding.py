"""What goes through: no resend after delivery, streaming, limits, headers, access log."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator

import aiohttp
import pytest

from mrtr_lb.answers import jsonrpc_error_body, request_id_of
from tests.lb.standin import MakeBackend, MakeLB, MakeRude, RudeMode, backend_states, jsonrpc_body, wait_until

HOLD_BACK = 10.0  # only guards against hanging; never a speed assertion


@pytest.mark.parametrize("mode", ["close", "partial"])
async def test_delivered_then_dropped_is_502_and_not_retried(
    mode: RudeMode,
    make_backend: MakeBackend,
    make_rude: MakeRude,
    make_lb: MakeLB,
    client: aiohttp.ClientSession,
) -> None:
    rude, good = await make_rude(mode), await make_backend("good")
    lb = await make_lb(backends=[rude.url, good.url])

    statuses = []
    for number in range(4):
        sent = jsonrpc_body(request_id=f"call-{number}")
        async with client.post(f"{lb.url}/mcp", data=sent) as resp:
            statuses.append(resp.status)
            if resp.status == 502:
                body = await resp.json()
                assert body["jsonrpc"] == "2.0"
                assert body["id"] == f"call-{number}"  # MCP's schema wants the request's id, never null
                assert body["error"]["code"] == -32603
                assert body["error"]["message"].startswith("upstream failed: ")
            else:
                await resp.read()

    assert sorted(statuses) == [200, 200, 502, 502]
    assert rude.seen == ["POST /mcp", "POST /mcp"]
    assert len(good.seen) == 2  # the good backend never got a copy of the failed ones


@pytest.mark.parametrize("mode", ["close", "partial"])
@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
async def test_idempotent_method_is_not_resent_either(
    method: str, mode: RudeMode, make_rude: MakeRude, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    # aiohttp's client would silently retry these on a fresh connection; the proxy must not.
    rude = await make_rude(mode)
    lb = await make_lb(backends=[rude.url])
    data = jsonrpc_body() if method == "PUT" else None
    async with client.request(method, f"{lb.url}/mcp", data=data) as resp:
        assert resp.status == 502
        assert (await resp.json())["error"]["message"].startswith("upstream failed: ")
    assert rude.seen == [f"{method} /mcp"]


async def test_truncated_body_is_passed_on_as_a_broken_response(
    make_backend: MakeBackend,
    make_rude: MakeRude,
    make_lb: MakeLB,
    client: aiohttp.ClientSession,
) -> None:
    rude, good = await make_rude("truncate"), await make_backend("good")
    lb = await make_lb(backends=[rude.url, good.url])

    outcomes: list[str] = []
    for _ in range(2):
        async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
            try:
                await resp.read()
                outcomes.append(f"complete {resp.status}")
            except aiohttp.ClientPayloadError:
                outcomes.append(f"broken {resp.status}")

    assert sorted(outcomes) == ["broken 200", "complete 200"]
    assert rude.seen == ["POST /mcp"]
    assert len(good.seen) == 1


async def test_sse_events_are_not_buffered(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    backend = await make_backend("sse")
    lb = await make_lb(backends=[backend.url])

    async with client.post(
        f"{lb.url}/mcp",
        data=jsonrpc_body(),
        headers={"X-Test-Mode": "sse", "Accept": "text/event-stream"},
    ) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        assert resp.headers["X-Worker-Id"] == "sse"
        first = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), HOLD_BACK)
        # The backend is still blocked before its second event: nothing sat in a buffer.
        assert not backend.sse_gate.is_set()
        assert first == b'event: message\ndata: {"n": 1}\n\n'

        backend.sse_gate.set()
        rest = await asyncio.wait_for(resp.content.read(), HOLD_BACK)
    assert rest == b'event: message\ndata: {"n": 2}\n\n'


async def test_body_over_limit_is_413(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    backend = await make_backend("a")
    lb = await make_lb(backends=[backend.url], max_body_size=1024)

    async with client.post(f"{lb.url}/mcp", data=b"x" * 1024) as resp:
        assert resp.status == 200
        assert (await resp.json())["result"]["bytes"] == 1024

    async with client.post(f"{lb.url}/mcp", data=b"x" * 1025) as resp:
        assert resp.status == 413
        body = await resp.json()
        assert body["jsonrpc"] == "2.0"
        assert "larger than 1024" in body["error"]["message"]

    async def chunked() -> AsyncIterator[bytes]:
        for _ in range(3):
            yield b"y" * 600

    async with client.post(f"{lb.url}/mcp", data=chunked()) as resp:
        assert resp.status == 413

    assert len(backend.seen) == 1


async def test_headers_pass_through_without_hop_by_hop(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url])

    async with client.post(
        f"{lb.url}/mcp?x=1",
        data=jsonrpc_body(),
        headers={
            "Content-Type": "application/json",
            "Mcp-Session-Id": "abc",
            "Keep-Alive": "timeout=5",
            "Connection": "keep-alive, X-Private-Hop",
            "X-Private-Hop": "secret",
            "Proxy-Authorization": "Basic Zm9vOmJhcg==",
        },
    ) as resp:
        assert resp.status == 200
        assert resp.headers["X-Worker-Id"] == "w"
        assert resp.headers["X-Worker-Version"] == "test-1"
        assert resp.headers["Set-Cookie"] == "w=1"
        await resp.read()

    seen = backend.seen[0].headers
    assert seen["content-type"] == "application/json"
    assert seen["mcp-session-id"] == "abc"
    assert seen["x-forwarded-for"] == "127.0.0.1"
    assert seen["host"] == f"127.0.0.1:{lb.port}"
    for hop in ("keep-alive", "x-private-hop", "proxy-authorization"):
        assert hop not in seen
    assert "cookie" not in seen  # the proxy keeps no cookie jar between clients


def access_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mrtr_lb.access"]


def access_pattern(method: str, path: str, mcp_method: str, mcp_name: str, rest: str) -> str:
    """One access-log line, every field in its place (what operators' parsers rely on)."""
    return f"{method} {re.escape(path)} mcp_method={re.escape(mcp_method)} mcp_name={re.escape(mcp_name)} {rest}"


async def test_access_log_line(
    make_backend: MakeBackend,
    make_lb: MakeLB,
    client: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url])
    caplog.set_level(logging.INFO, logger="mrtr_lb.access")

    headers = {"Mcp-Method": "tools/call", "Mcp-Name": "slow add"}
    async with client.post(f"{lb.url}/mcp", data=jsonrpc_body(), headers=headers) as resp:
        await resp.read()

    [line] = access_lines(caplog)
    ok = rf"backend={re.escape(backend.url)} status=200 duration_ms=\d+\.\d retried=no attempts=1 result=ok worker=w"
    assert re.fullmatch(access_pattern("POST", "/mcp", "tools/call", '"slow add"', ok), line), line


async def test_access_log_fields_are_each_requests_own_on_a_reused_connection(
    make_backend: MakeBackend, make_lb: MakeLB, caplog: pytest.LogCaptureFixture
) -> None:
    """The lean engine keeps a line's start with the header block a connection's requests reuse: a request
    whose tool, method or path differs, or that never reached a backend, still gets its own fields."""
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url], proxy_paths=["/mcp", "/other"], max_body_size=1024)
    caplog.set_level(logging.INFO, logger="mrtr_lb.access")
    to = rf"backend={re.escape(backend.url)}"
    ok = rf"{to} status=200 duration_ms=\d+\.\d retried=no attempts=1 result=ok worker=w"
    not_found = rf"{to} status=404 duration_ms=\d+\.\d retried=no attempts=1 result=ok worker=-"  # the stand-in's
    too_large = r"backend=- status=413 duration_ms=\d+\.\d retried=no attempts=0 result=rejected worker=-"
    sent = [
        ("POST", "/mcp", "echo", jsonrpc_body(), ok),
        ("POST", "/mcp", "echo", jsonrpc_body(), ok),
        ("POST", "/mcp", "add", jsonrpc_body(), ok),
        ("POST", "/other", "add", jsonrpc_body(), not_found),
        ("PUT", "/other", "add", jsonrpc_body(), not_found),
        ("POST", "/mcp", "add", b"x" * 2048, too_large),  # never sent to a backend
        ("POST", "/mcp", "echo", jsonrpc_body(), ok),
    ]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as one_connection:
        for method, path, name, body, _ in sent:
            headers = {"Mcp-Method": "tools/call", "Mcp-Name": name}
            async with one_connection.request(method, f"{lb.url}{path}", data=body, headers=headers) as resp:
                await resp.read()
    lines = access_lines(caplog)
    assert len(lines) == len(sent), lines
    for line, (method, path, name, _, rest) in zip(lines, sent, strict=True):
        assert re.fullmatch(access_pattern(method, path, "tools/call", name, rest), line), line


async def test_client_leaving_an_sse_stream_frees_the_upstream(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    backend = await make_backend("sse")
    lb = await make_lb(backends=[backend.url])

    async with aiohttp.ClientSession() as leaving:
        resp = await leaving.post(f"{lb.url}/mcp", data=jsonrpc_body(), headers={"X-Test-Mode": "sse"})
        await asyncio.wait_for(resp.content.readuntil(b"\n\n"), HOLD_BACK)
        assert (await backend_states(client, lb))[backend.url]["in_flight"] == 1
        resp.close()  # hang up mid-stream; the backend never sends its second event

    async def released() -> bool:
        return bool((await backend_states(client, lb))[backend.url]["in_flight"] == 0)

    await wait_until(released, what="upstream stream released")
    assert not backend.sse_gate.is_set()


@pytest.mark.parametrize(
    ("body", "echoed"),
    [
        (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call"}', 7),
        (b'{"jsonrpc": "2.0", "id": "a-7", "method": "tools/call"}', "a-7"),
        (b'{"jsonrpc": "2.0", "method": "notifications/cancelled"}', None),  # a notification has no id
        (b'{"jsonrpc": "2.0", "id": true, "method": "x"}', None),  # not an id JSON-RPC allows
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "x"}]', None),  # a batch
        (b"{not json", None),
    ],
)
def test_an_error_the_proxy_writes_answers_the_requests_id(body: bytes, echoed: str | int | None) -> None:
    assert json.loads(jsonrpc_error_body("upstream failed: x", request_id=request_id_of(body)))["id"] == echoed
