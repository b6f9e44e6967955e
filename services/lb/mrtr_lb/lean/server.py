"""The lean engine's public listener: an asyncio server of :class:`ClientConnection` protocols, no web framework.

It serves the proxied paths (404 for anything else: the ``/lb/`` admin API is on
the admin listener, :mod:`mrtr_lb.admin_server`) over the pool, health checks
and discovery, within the bounds of :mod:`mrtr_lb.bounds`.
"""

from __future__ import annotations

import asyncio
import contextlib

from mrtr_lb.answers import JSON, MAX_LINGERING, Overloaded, jsonrpc_error_body, simple_response
from mrtr_lb.backends import BackendPool
from mrtr_lb.background import background
from mrtr_lb.balancing import picker
from mrtr_lb.bounds import Limits
from mrtr_lb.config import Settings
from mrtr_lb.discovery import Resolver
from mrtr_lb.lean.forward import Forward
from mrtr_lb.lean.http import ClientConnection, LeanRequest
from mrtr_lb.lean.proxy import LeanProxy
from mrtr_lb.metrics import LbMetrics
from mrtr_lb.rules import not_proxied


class LeanServer:
    """Listener + pool + background checks; :meth:`start` then :meth:`stop`."""

    def __init__(self, settings: Settings, *, resolver: Resolver | None = None) -> None:
        self.settings = settings
        self.pool = BackendPool(settings.backends)
        self.pool.picker = picker(settings.balance)
        self.metrics = LbMetrics()
        self._resolver = resolver
        self._proxy = LeanProxy(self.pool, self.metrics, settings)
        self._paths = frozenset(settings.proxy_paths)
        self._limits = Limits.from_settings(settings)
        self._connections: set[ClientConnection] = set()
        self._lingering: set[Overloaded] = set()
        self._stack = contextlib.AsyncExitStack()
        self._server: asyncio.Server | None = None
        self.port = settings.port

    async def start(self) -> LeanServer:
        await self._stack.enter_async_context(background(self.settings, self.pool, self._resolver, self.metrics))
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(
                self._connection,
                self.settings.host,
                self.settings.port,
                reuse_address=True,
            )
        except BaseException:
            await self._stack.aclose()
            raise
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._proxy.start()
        return self

    def _connection(self) -> asyncio.Protocol:
        """A protocol for a new client connection; past ``MAX_CONNECTIONS`` a 503 and a close."""
        if len(self._connections) >= self._limits.max_connections:
            return Overloaded(self.settings.retry_after, self._lingering, MAX_LINGERING)
        return ClientConnection(self.dispatch, self._limits, self._connections)

    def dispatch(self, client: ClientConnection, req: LeanRequest) -> None:
        """The proxied paths go to a worker; anything else (``/lb/`` included) is 404 here."""
        path = req.path
        if path in self._paths:
            Forward(self._proxy, client, req, path).run()
            return
        head = req.method == "HEAD"
        if req.reject is not None:
            status, message = req.reject
            body, kind = jsonrpc_error_body(message, -32600), JSON
        else:
            status, kind = 404, JSON
            body = jsonrpc_error_body(not_proxied(path), -32601)
        client.write(simple_response(status, body, kind, keep_alive=req.keep_alive, head=head))
        client.done(req)

    async def stop(self) -> None:
        """Stop accepting, let open requests finish for up to the shutdown timeout, then close the rest."""
        if self._server is not None:
            self._server.close()
            running = [asyncio.ensure_future(conn.finished()) for conn in self._connections if conn.busy]
            for conn in list(self._connections):
                if not conn.busy:
                    conn.close()
            if running:
                _, late = await asyncio.wait(running, timeout=self.settings.shutdown_timeout)
                for waiter in late:
                    waiter.cancel()
            for conn in list(self._connections):
                conn.close()
            self._server = None
        self._proxy.close()
        await self._stack.aclose()
