"""Header rules the proxy keeps: the X-Forwarded-* chain and hop-by-hop headers a backend declares.

The lean engine builds the upstream request and the client's response head
from bytes itself; these pin what it must keep or drop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp
import pytest

from tests.lb.standin import MakeBackend, MakeLB, jsonrpc_body

BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'
DECLARING = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
    b"Connection: keep-alive, X-Private-Hop\r\nX-Private-Hop: secret\r\nKeep-Alive: timeout=5\r\n"
    b"X-Worker-Id: raw\r\n\r\n%s" % (len(BODY), BODY)
)


PLAIN = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nX-Dup: a\r\nx-dup: b\r\nX-Worker-Id: plain\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
)


@pytest.fixture
async def declaring_backend() -> AsyncIterator[str]:
    """A raw backend whose /mcp answer lists a private header in ``Connection``; /readyz is plain 200."""
    async with raw_backend(DECLARING) as url:
        yield url


@pytest.fixture
async def plain_backend() -> AsyncIterator[str]:
    """A raw backend whose /mcp answer has no hop-by-hop header but one header twice, in two casings."""
    async with raw_backend(PLAIN) as url:
        yield url


@contextlib.asynccontextmanager
async def raw_backend(answer: bytes) -> AsyncIterator[str]:
    """A keep-alive backend on a raw socket that answers every /mcp request with ``answer``."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                ready = head.startswith(b"GET /readyz")
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" if ready else answer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    server.close()


async def test_forwarded_headers_extend_the_clients_chain(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url])
    headers = {"X-Forwarded-For": "10.0.0.1", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "example.org"}
    async with client.post(f"{lb.url}/mcp", data=jsonrpc_body(), headers=headers) as resp:
        assert resp.status == 200
    seen = backend.seen[0].headers
    assert seen["x-forwarded-for"] == "10.0.0.1, 127.0.0.1"
    assert seen["x-forwarded-proto"] == "https"
    assert seen["x-forwarded-host"] == "example.org"


async def test_headers_the_backend_declares_hop_by_hop_are_dropped(
    declaring_backend: str, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    lb = await make_lb(backends=[declaring_backend])
    for _ in range(2):  # the second on the reused upstream connection
        async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
            assert resp.status == 200
            assert resp.headers["X-Worker-Id"] == "raw"
            assert "X-Private-Hop" not in resp.headers
            assert "Keep-Alive" not in resp.headers
            assert await resp.read() == BODY


async def test_a_head_without_hop_by_hop_headers_is_passed_on_as_sent(
    plain_backend: str, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    lb = await make_lb(backends=[plain_backend])
    for _ in range(3):  # the later ones on the reused upstream connection (its parser reads on)
        async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
            assert resp.status == 200
            assert resp.headers.getall("X-Dup") == ["a", "b"]
            assert resp.headers["X-Worker-Id"] == "plain"
            assert await resp.read() == BODY


async def test_each_request_on_a_connection_forwards_its_own_headers(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    """The lean engine reuses a connection's upstream header block only for the very same headers."""
    backend = await make_backend("w")
    lb = await make_lb(backends=[backend.url])
    sent = [("echo", b"{}"), ("echo", b'{"longer": "body"}'), ("add", b"{}"), ("echo", b"[]")]
    for name, body in sent:  # one pooled client connection: aiohttp keeps it alive
        async with client.post(f"{lb.url}/mcp", data=body, headers={"Mcp-Name": name}) as resp:
            assert resp.status == 200
    assert [(seen.headers["mcp-name"], seen.body) for seen in backend.seen] == sent
    assert all(seen.headers["content-length"] == str(len(seen.body)) for seen in backend.seen)
