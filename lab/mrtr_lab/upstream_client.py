"""Measure, rather than assume, which HTTP stack the proxy should use.

Part 1 drives a trivial local backend directly with each candidate upstream
client (aiohttp ClientSession, httpx.AsyncClient with roomy and with default
pool limits, and httpx2 when installed) at several concurrencies. Part 2
puts a proxy between load generator and backend: mrtr_lb itself (aiohttp
server + aiohttp client) and a minimal ASGI proxy under uvicorn, to compare
the server side. Each process gets its own CPU budget, so the backend and
the load generator never share an event loop with the thing being measured.

    python -m mrtr_lab.upstream_client [--duration 3] [--concurrency 1 16 64] [--skip-proxy]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import httpx

from mrtr_ops.waiting import wait_until_async

BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}).encode()
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
_REPLY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}'
RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Worker-Id: bench\r\n"
    b"X-Worker-Version: 0\r\nContent-Length: " + str(len(_REPLY)).encode() + b"\r\n\r\n" + _REPLY
)

Send = Callable[[], Awaitable[None]]


# --- the trivial backend: as cheap as possible so the client side dominates ----------


class _TrivialHttp(asyncio.Protocol):
    """Answers every keep-alive HTTP/1.1 request (Content-Length bodies) with RESPONSE."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while (end := self._buf.find(b"\r\n\r\n")) >= 0:
            head = bytes(self._buf[:end]).lower()
            length = 0
            if (at := head.find(b"\r\ncontent-length:")) >= 0:
                stop = head.find(b"\r\n", at + 2)
                length = int(head[at + 17 : stop if stop >= 0 else len(head)])
            total = end + 4 + length
            if len(self._buf) < total:
                return
            del self._buf[:total]
            assert self._transport is not None
            self._transport.write(RESPONSE)


async def serve_backend() -> None:
    server = await asyncio.get_running_loop().create_server(_TrivialHttp, "127.0.0.1", 0)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.Event().wait()


# --- proxies under test (part 2) ---------------------------------------------------


async def serve_mrtr_lb(upstream: str) -> None:
    from mrtr_lb import Settings, start_server

    lb = await start_server(Settings(port=0, admin_port=0, backends=[upstream], health_interval=1.0))
    print(f"PORT {lb.port}", flush=True)
    await asyncio.Event().wait()


def serve_uvicorn_proxy(upstream: str) -> None:
    """A minimal streaming ASGI proxy (aiohttp client) under uvicorn, for the server-side figure."""
    import socket

    import uvicorn

    session: aiohttp.ClientSession | None = None

    async def app(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]], send: Any) -> None:
        nonlocal session
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                session = aiohttp.ClientSession()
                await send({"type": "lifespan.startup.complete"})
            if session is not None:
                await session.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        assert session is not None
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        headers = [(k.decode(), v.decode()) for k, v in scope["headers"] if k not in (b"host", b"content-length")]
        async with session.request(scope["method"], upstream + scope["path"], data=body, headers=headers) as r:
            out = [(k.lower().encode(), v.encode()) for k, v in r.headers.items() if k.lower() != "transfer-encoding"]
            await send({"type": "http.response.start", "status": r.status, "headers": out})
            async for chunk in r.content.iter_any():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})

    # proto must say TCP, or asyncio skips TCP_NODELAY on accepted sockets (40 ms Nagle stalls).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


# --- load generation -----------------------------------------------------------------


async def measure(send: Send, concurrency: int, duration: float) -> float:
    """Requests per second over ``duration`` after a short warm-up, ``concurrency`` loops."""
    loop = asyncio.get_running_loop()
    warm_until = loop.time() + min(0.5, duration / 4)
    stop_at = warm_until + duration
    done = 0

    async def worker() -> None:
        nonlocal done
        while (now := loop.time()) < stop_at:
            await send()
            if now >= warm_until:
                done += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / duration


@contextlib.asynccontextmanager
async def aiohttp_sender(url: str) -> AsyncIterator[Send]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def send() -> None:
            async with session.post(url, data=BODY, headers=HEADERS) as resp:
                await resp.read()
                resp.raise_for_status()

        yield send


def _httpx_like(module: Any, roomy: bool) -> Callable[[str], contextlib.AbstractAsyncContextManager[Send]]:
    @contextlib.asynccontextmanager
    async def sender(url: str) -> AsyncIterator[Send]:
        kwargs = {"limits": module.Limits(max_connections=None, max_keepalive_connections=256)} if roomy else {}
        async with module.AsyncClient(**kwargs) as client:

            async def send() -> None:
                resp = await client.post(url, content=BODY, headers=HEADERS)
                resp.raise_for_status()

            yield send

    return sender


def candidates() -> dict[str, Callable[[str], contextlib.AbstractAsyncContextManager[Send]]]:
    found = {
        "aiohttp.ClientSession": aiohttp_sender,
        "httpx.AsyncClient": _httpx_like(httpx, roomy=True),
        "httpx.AsyncClient (default limits)": _httpx_like(httpx, roomy=False),
    }
    if importlib.util.find_spec("httpx2") is not None:
        import httpx2

        found["httpx2.AsyncClient"] = _httpx_like(httpx2, roomy=True)
    return found


# --- orchestration -------------------------------------------------------------------


@contextlib.contextmanager
def child(*args: str) -> Iterator[int]:
    """Run this module in a child process in a serve mode; yield the port it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mrtr_lab.upstream_client", *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"child {args} did not start: {line!r}")
        yield int(line.split()[1])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def row(name: str, figures: list[float]) -> str:
    return f"{name:<40}" + "".join(f"{f:>10.0f}" for f in figures)


async def bench(args: argparse.Namespace) -> None:
    header = f"{'requests/s at concurrency':<40}" + "".join(f"{c:>10}" for c in args.concurrency)
    with child("--serve-backend") as backend_port:
        backend = f"http://127.0.0.1:{backend_port}"
        print("Upstream client -> trivial backend", flush=True)
        print(header, flush=True)
        for name, make in candidates().items():
            figures = []
            for concurrency in args.concurrency:
                async with make(f"{backend}/mcp") as send:
                    figures.append(await measure(send, concurrency, args.duration))
            print(row(name, figures), flush=True)
        if args.skip_proxy:
            return
        print("\nLoad generator (aiohttp) -> proxy -> trivial backend", flush=True)
        print(header, flush=True)
        proxies = {
            "mrtr_lb (aiohttp.web + aiohttp client)": "--serve-mrtr-lb",
            "uvicorn ASGI + aiohttp client": "--serve-uvicorn",
        }
        for name, flag in proxies.items():
            with child(flag, backend) as port:
                await _wait_listening(port)
                figures = []
                for concurrency in args.concurrency:
                    async with aiohttp_sender(f"http://127.0.0.1:{port}/mcp") as send:
                        figures.append(await measure(send, concurrency, args.duration))
                print(row(name, figures), flush=True)


async def _wait_listening(port: int) -> None:
    """The proxy printed its port before its first health check finished; poll until it forwards."""
    async with aiohttp.ClientSession() as session:

        async def forwards() -> bool:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.post(f"http://127.0.0.1:{port}/mcp", data=BODY) as resp:
                    return resp.status == 200
            return False

        await wait_until_async(forwards, timeout=10, what=f"the proxy on port {port} to answer 200")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mrtr_lab.upstream_client", description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=3.0, help="measured seconds per cell")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--skip-proxy", action="store_true", help="only compare the upstream clients")
    parser.add_argument("--serve-backend", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-mrtr-lb", metavar="UPSTREAM", help=argparse.SUPPRESS)
    parser.add_argument("--serve-uvicorn", metavar="UPSTREAM", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        if args.serve_backend:
            asyncio.run(serve_backend())
        elif args.serve_mrtr_lb:
            asyncio.run(serve_mrtr_lb(args.serve_mrtr_lb))
        elif args.serve_uvicorn:
            serve_uvicorn_proxy(args.serve_uvicorn)
        else:
            asyncio.run(bench(args))


if __name__ == "__main__":
    main()
