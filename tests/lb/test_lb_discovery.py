"""DNS discovery: backends appear and vanish as the name's answer changes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest

from mrtr_lb.discovery import Endpoint
from tests.lb.standin import MakeBackend, MakeLB, backend_states, jsonrpc_body, wait_until, write_backends


class FakeDns:
    """A resolver whose answer the test rewrites; it may also fail on demand."""

    def __init__(self) -> None:
        self.answer: list[Endpoint] = []
        self.fail = False
        self.queries = 0

    async def __call__(self, host: str, port: int) -> list[Endpoint]:
        assert (host, port) == ("worker", 8000)
        self.queries += 1
        if self.fail:
            raise OSError("temporary failure in name resolution")
        return list(self.answer)


async def test_dns_answer_changes_are_followed(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a, b = await make_backend("a"), await make_backend("b")
    dns = FakeDns()
    dns.answer = [("127.0.0.1", a.port)]
    lb = await make_lb(backend_dns="worker:8000", dns_interval=0.02, resolver=dns)

    async def healthy_urls(expected: set[str]) -> bool:
        states = await backend_states(client, lb)
        return {u for u, s in states.items() if s["state"] == "healthy"} == expected and set(states) == expected

    await wait_until(lambda: healthy_urls({a.url}), what="a discovered")

    dns.answer = [("127.0.0.1", a.port), ("127.0.0.1", b.port)]
    await wait_until(lambda: healthy_urls({a.url, b.url}), what="b discovered")
    workers = set()
    for _ in range(4):
        async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
            workers.add(resp.headers["X-Worker-Id"])
    assert workers == {"a", "b"}

    # A failed lookup keeps what we had.
    dns.fail = True
    before = dns.queries
    await wait_until(_more_queries(dns, before), what="failed lookups")
    assert set(await backend_states(client, lb)) == {a.url, b.url}
    dns.fail = False

    dns.answer = [("127.0.0.1", b.port)]
    await wait_until(lambda: healthy_urls({b.url}), what="a removed")
    async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
        assert resp.headers["X-Worker-Id"] == "b"

    dns.answer = []
    await wait_until(lambda: healthy_urls(set()), what="all removed")
    async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
        assert resp.status == 503


async def test_system_resolver_finds_localhost(
    make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    a = await make_backend("a")
    lb = await make_lb(backend_dns=f"localhost:{a.port}", dns_interval=0.05)

    async def found() -> bool:
        states = await backend_states(client, lb)
        return states.get(a.url, {}).get("state") == "healthy"

    await wait_until(found, what="localhost resolved to 127.0.0.1")
    async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
        assert resp.headers["X-Worker-Id"] == "a"


def _more_queries(dns: FakeDns, before: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return dns.queries >= before + 2

    return check


async def test_the_backends_file_is_followed(
    make_backend: MakeBackend,
    make_lb: MakeLB,
    client: aiohttp.ClientSession,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The launcher's discovery: lines added join, lines removed leave, a bad file changes nothing."""
    a, b = await make_backend("a"), await make_backend("b")
    listing = tmp_path / "backends"
    listing.write_text(f"# the local cluster's workers\n{a.url}\n\n")
    lb = await make_lb(backends_file=listing)

    async def healthy_urls(expected: set[str]) -> bool:
        states = await backend_states(client, lb)
        return {u for u, s in states.items() if s["state"] == "healthy"} == expected and set(states) == expected

    await wait_until(lambda: healthy_urls({a.url}), what="a read from the file")
    assert (await backend_states(client, lb))[a.url]["source"] == "file"

    write_backends(listing, [a.url, f"127.0.0.1:{b.port}"])  # a bare host:port means http://
    await wait_until(lambda: healthy_urls({a.url, b.url}), what="b added to the file")
    workers = set()
    for _ in range(4):
        async with client.post(f"{lb.url}/mcp", data=jsonrpc_body()) as resp:
            workers.add(resp.headers["X-Worker-Id"])
    assert workers == {"a", "b"}

    caplog.set_level(logging.WARNING, logger="mrtr_lb.discovery")
    write_backends(listing, [b.url, "ftp://nope:1"])  # one bad line: the whole file is not applied
    await wait_until(lambda: _async(any(":2: " in r.getMessage() for r in caplog.records)), what="the bad line named")
    assert set(await backend_states(client, lb)) == {a.url, b.url}

    write_backends(listing, [b.url])
    await wait_until(lambda: healthy_urls({b.url}), what="a removed from the file")
    listing.unlink()  # gone: the current set stays (as for a failed DNS lookup)
    await wait_until(lambda: _async(any("No such file" in r.getMessage() for r in caplog.records)), what="said")
    assert set(await backend_states(client, lb)) == {b.url}


async def _async(value: bool) -> bool:
    return value
