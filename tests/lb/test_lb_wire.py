"""HTTP/1.1 on the wire, byte by byte: what a hand-written parser could get wrong.

Raw sockets, so that nothing in a client library hides pipelining, chunked
request bodies, ``Expect: 100-continue``, HTTP/1.0 or HEAD from the proxy.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp

from tests.lb.standin import MakeBackend, MakeLB, jsonrpc_body

HANG_GUARD = 10.0  # only guards against hanging; never a speed assertion


async def exchange(port: int, data: bytes, *, until_eof: bool = True, expect: int = 1) -> bytes:
    """Send ``data`` on one connection; read until the server closes it or ``expect`` responses came."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        if until_eof:
            return await asyncio.wait_for(reader.read(), HANG_GUARD)
        received = b""
        while received.count(b"HTTP/1.1 200") < expect or not _complete(received, expect):
            chunk = await asyncio.wait_for(reader.read(65536), HANG_GUARD)
            assert chunk, f"connection closed early: {received!r}"
            received += chunk
        return received
    finally:
        writer.close()


def _complete(data: bytes, count: int) -> bool:
    """``count`` responses with Content-Length bodies are all in ``data``."""
    for _ in range(count):
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            return False
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
            0,
        )
        if len(rest) < length:
            return False
        data = rest[length:]
    return True


def post(body: bytes, *extra: bytes, version: bytes = b"HTTP/1.1") -> bytes:
    headers = [b"POST /mcp " + version, b"Host: lb", b"Content-Type: application/json", *extra]
    return b"\r\n".join([*headers, b"Content-Length: %d" % len(body), b"", body])


def bodies(raw: bytes) -> list[dict[str, object]]:
    """The JSON bodies of the responses in ``raw``, in order."""
    out = []
    for part in raw.split(b"HTTP/1.1 ")[1:]:
        body = part.partition(b"\r\n\r\n")[2]
        out.append(json.loads(body[: body.rindex(b"}") + 1]))
    return out


async def test_pipelined_requests_are_answered_in_order(make_backend: MakeBackend, make_lb: MakeLB) -> None:
    backends = [await make_backend("a"), await make_backend("b")]
    lb = await make_lb(backends=[b.url for b in backends])
    sizes = [10, 20, 30]
    raw = await exchange(lb.port, b"".join(post(b"x" * n) for n in sizes), until_eof=False, expect=3)
    assert [body["result"]["bytes"] for body in bodies(raw)] == sizes  # type: ignore[index]


async def test_chunked_request_body_reaches_the_worker_whole(make_backend: MakeBackend, make_lb: MakeLB) -> None:
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url])
    payload = jsonrpc_body()
    half = len(payload) // 2
    chunks = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (half, payload[:half], len(payload) - half, payload[half:])
    request = b"POST /mcp HTTP/1.1\r\nHost: lb\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunks
    raw = await exchange(lb.port, request)
    assert raw.startswith(b"HTTP/1.1 200")
    assert backend.seen[0].body == payload
    assert backend.seen[0].headers["content-length"] == str(len(payload))
    assert "transfer-encoding" not in backend.seen[0].headers


async def test_expect_100_continue_is_answered_by_the_proxy(make_backend: MakeBackend, make_lb: MakeLB) -> None:
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url])
    body = jsonrpc_body()
    reader, writer = await asyncio.open_connection("127.0.0.1", lb.port)
    try:
        head = b"POST /mcp HTTP/1.1\r\nHost: lb\r\nExpect: 100-continue\r\nConnection: close\r\n"
        writer.write(head + b"Content-Length: %d\r\n\r\n" % len(body))
        await writer.drain()
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HANG_GUARD)
        assert interim.startswith(b"HTTP/1.1 100")
        writer.write(body)
        rest = await asyncio.wait_for(reader.read(), HANG_GUARD)
    finally:
        writer.close()
    assert rest.startswith(b"HTTP/1.1 200")
    assert backend.seen[0].body == body
    assert "expect" not in backend.seen[0].headers


async def test_http_1_0_client_gets_its_answer_and_a_close(make_backend: MakeBackend, make_lb: MakeLB) -> None:
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url])
    raw = await exchange(lb.port, post(jsonrpc_body(), version=b"HTTP/1.0"))  # ends: the proxy closed
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"200"
    assert json.loads(body)["result"]["worker"] == "w"


async def test_head_request_gets_headers_only(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url])
    raw = await exchange(lb.port, b"HEAD /mcp HTTP/1.1\r\nHost: lb\r\nConnection: close\r\n\r\n")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"x-worker-id: w" in head.lower()
    assert body == b""
    async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:  # the backend is still fine
        assert resp.status == 200


async def test_upstream_connections_are_kept_alive(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url])
    for _ in range(5):
        async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
            assert resp.status == 200
            await resp.read()
    assert len(backend.peers) == 5
    assert len(set(backend.peers)) == 1  # one pooled connection carried all five


async def test_malformed_request_is_400_and_closed(make_backend: MakeBackend, make_lb: MakeLB) -> None:
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url])
    raw = await exchange(lb.port, b"POST /mcp HTTP/1.1\r\nHost: lb\r\nContent-Length: nope\r\n\r\n{}")
    assert raw.split(b" ")[1] == b"400"
    assert backend.seen == []
