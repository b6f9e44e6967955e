"""Stand-in workers for the proxy tests.

``StandIn`` imitates a well-behaved MRTR worker (``/readyz`` as :mod:`mrtr_protocol.fleet` says,
``/healthz``, ``/mcp`` with ``X-Worker-Id``, ``/admin/rebalance`` when told what to answer); the
``X-Test-Mode`` request header makes it hold a response or stream SSE on the test's command, or answer
64 MiB, and ``freeze()`` makes it answer nothing at all (like a paused process) until ``thaw()``.
``RudeBackend`` is a raw TCP server that passes health checks but breaks every other request, to see
what the proxy does once a request may have been delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import aiohttp
from aiohttp import web

from mrtr_lb import RunningLB
from mrtr_ops.metrics_page import MetricsPage
from mrtr_protocol.fleet import READINESS_PATH, REBALANCE_PATH, Readiness

ADMIN_TOKEN = "lb-test-operator-token"
"""The operator token every test proxy has (its admin listener wants it; it is sent with rebalance calls)."""
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
BIG = 64 * 1024 * 1024
"""The size of an ``X-Test-Mode: big`` response."""


@dataclass
class Seen:
    """One request as a stand-in received it (header names lower-cased)."""

    method: str
    headers: dict[str, str]
    body: bytes


class StandIn:
    """A real aiohttp server on 127.0.0.1 that records what it received."""

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self.ready = True
        self.slow = False  # not ready because it steps aside as slow: /readyz answers the contract's 429
        self.readyz_body = b""  # what /readyz says beside its status, which the proxy must not read
        self.rebalance_answer: object = None  # the JSON its POST /admin/rebalance answers; None: 404, no hook
        self.rebalances = 0  # POST /admin/rebalance received
        self.seen: list[Seen] = []
        self.release = asyncio.Event()  # lets "hold" requests answer
        self.sse_gate = asyncio.Event()  # lets the second SSE event go out
        self.holding = 0
        self.probes = 0  # /readyz requests received
        self.cut_short = 0  # big responses whose reader went away before their end
        self.peers: list[object] = []  # the proxy's address for each /mcp request: how connections are reused
        self._thawed = asyncio.Event()
        self._thawed.set()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> StandIn:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get(READINESS_PATH, self._readyz)
        app.router.add_post(REBALANCE_PATH, self._rebalance)
        app.router.add_get("/status/{status}", self._status)  # a health path that answers the status it names
        app.router.add_route("*", "/mcp", self._mcp)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            self.release.set()
            self.sse_gate.set()
            self._thawed.set()
            await runner.cleanup()

    def freeze(self) -> None:
        """Answer nothing from now on, not even /readyz (a SIGSTOPped worker, a host cut off)."""
        self._thawed.clear()

    def thaw(self) -> None:
        self._thawed.set()

    def _headers(self) -> dict[str, str]:
        return {"X-Worker-Id": self.worker_id, "X-Worker-Version": "test-1"}

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok", headers=self._headers())

    async def _readyz(self, request: web.Request) -> web.Response:
        self.probes += 1
        await self._thawed.wait()
        status = Readiness.READY
        if not self.ready:
            status = Readiness.STEPPED_ASIDE if self.slow else Readiness.NOT_READY
        return web.Response(body=self.readyz_body, status=status, content_type="application/json")

    async def _status(self, request: web.Request) -> web.Response:
        return web.Response(status=int(request.match_info["status"]))

    async def _rebalance(self, request: web.Request) -> web.Response:
        self.rebalances += 1
        if self.rebalance_answer is None:
            raise web.HTTPNotFound()
        return web.json_response(self.rebalance_answer)

    async def _mcp(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        self.seen.append(Seen(request.method, {k.lower(): v for k, v in request.headers.items()}, body))
        mode = request.headers.get("X-Test-Mode", "")
        if mode == "sse":
            return await self._sse(request)
        if mode == "big":  # more than every buffer between here and a client that reads nothing
            return await self._big(request)
        if mode == "hold":
            self.holding += 1
            try:
                await self.release.wait()
            finally:
                self.holding -= 1
        await self._thawed.wait()
        result = {"worker": self.worker_id, "bytes": len(body)}
        return web.json_response(
            {"jsonrpc": "2.0", "id": 1, "result": result},
            headers={**self._headers(), "Set-Cookie": "w=1"},
        )

    async def _big(self, request: web.Request) -> web.StreamResponse:
        """64 MiB a MiB at a time; ``cut_short`` counts the ones whose reader went away before the end."""
        response = web.StreamResponse(headers={**self._headers(), "Content-Type": "application/octet-stream"})
        response.content_length = BIG
        await response.prepare(request)
        piece = b"x" * (1024 * 1024)
        try:
            for _ in range(BIG // len(piece)):
                await response.write(piece)
        except ConnectionError:
            self.cut_short += 1
            raise
        await response.write_eof()
        return response

    async def _sse(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={**self._headers(), "Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        await response.write(b'event: message\ndata: {"n": 1}\n\n')
        await self.sse_gate.wait()
        await response.write(b'event: message\ndata: {"n": 2}\n\n')
        await response.write_eof()
        return response


RudeMode = Literal["close", "partial", "truncate"]


class RudeBackend:
    """Healthy on /readyz, but breaks every other request after reading it whole.

    ``close``: hang up without a byte of response; ``partial``: half a status
    line; ``truncate``: full headers promising 100 bytes, then 10 and hang up.
    """

    def __init__(self, mode: RudeMode = "close") -> None:
        self.mode = mode
        self.seen: list[str] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> RudeBackend:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if length:
                await reader.readexactly(length)
            if path == "/readyz":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            else:
                self.seen.append(f"{method} {path}")
                if self.mode == "partial":
                    writer.write(b"HTTP/1.1 20")
                elif self.mode == "truncate":
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 100\r\nX-Worker-Id: rude\r\n\r\n" + b'{"jsonrpc"'
                    )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def wait_until(
    predicate: Callable[[], Awaitable[bool]], *, within: float = 10.0, what: str = "condition"
) -> None:
    """Poll ``predicate`` until true; readiness is observed, never assumed after a sleep."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def jsonrpc_body(method: str = "tools/call", name: str = "echo", request_id: str | int = 1) -> bytes:
    params = {"name": name, "arguments": {}}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()


async def backend_states(client: aiohttp.ClientSession, lb: RunningLB) -> dict[str, dict[str, Any]]:
    """The pool as the proxy's admin listener lists it, by URL."""
    async with client.get(f"{lb.admin_url}/lb/backends", headers=ADMIN) as resp:
        assert resp.status == 200
        listing: list[dict[str, Any]] = await resp.json()
    return {entry["url"]: entry for entry in listing}


async def lb_metrics(client: aiohttp.ClientSession, lb: RunningLB) -> MetricsPage:
    """One scrape of the proxy's own metrics, on its admin listener."""
    async with client.get(f"{lb.admin_url}/lb/metrics", headers=ADMIN) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        return MetricsPage.parse(await resp.text())


async def admin_call(client: aiohttp.ClientSession, lb: RunningLB, action: str, url: str) -> tuple[int, dict[str, Any]]:
    """``POST /lb/backends/{action}?url=...`` on the admin listener, with the operator token: (status, body)."""
    async with client.post(f"{lb.admin_url}/lb/backends/{action}", params={"url": url}, headers=ADMIN) as resp:
        return resp.status, await resp.json()


def write_backends(path: Path, urls: Iterable[str]) -> None:
    """Replace the backends file at once (as the cluster launcher does): the proxy never reads half of it."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text("".join(f"{url}\n" for url in urls))
    os.replace(fresh, path)


MakeBackend = Callable[[str], Awaitable[StandIn]]
MakeRude = Callable[[RudeMode], Awaitable[RudeBackend]]
MakeLB = Callable[..., Awaitable[RunningLB]]
