"""The admin listener: the ``/lb/`` API on its own address and port, the operator token required.

Like Envoy's admin interface (bound to localhost) and HAProxy's stats socket,
the proxy's control plane is not on the door the users come in by: the public
listener serves the proxied paths only. This one binds ``MRTR_LB_ADMIN_HOST``
(127.0.0.1 by default; an unpublished port in compose, swarm and Kubernetes)
and wants the fleet's admin token on every call but the liveness probe. It is
bounded like the public listener: it runs on the lean engine's HTTP/1.1
connection (:mod:`mrtr_lb.lean.http`).
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import parse_qsl

from mrtr_lb.admin import PREFIX, Admin, authorize, log_call
from mrtr_lb.answers import JSON, Overloaded, jsonrpc_error_body, simple_response
from mrtr_lb.bounds import Limits
from mrtr_lb.config import Settings
from mrtr_lb.lean.http import ClientConnection, LeanRequest

log = logging.getLogger("mrtr_lb.admin")

MAX_CONNECTIONS = 64
"""Open connections on the admin listener: operators, probes and a scraper need a handful."""


class AdminServer:
    """Serves :class:`Admin` on ``settings.admin_host:admin_port``; :meth:`start` then :meth:`stop`."""

    def __init__(self, settings: Settings, admin: Admin) -> None:
        self._settings = settings
        self._admin = admin
        self._limits = Limits.from_settings(settings)
        self._connections: set[ClientConnection] = set()
        self._lingering: set[Overloaded] = set()
        self._server: asyncio.Server | None = None
        self.port = settings.admin_port

    async def start(self) -> AdminServer:
        settings = self._settings
        self._server = await asyncio.get_running_loop().create_server(
            self._connection, settings.admin_host, settings.admin_port, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def _connection(self) -> asyncio.Protocol:
        if len(self._connections) >= MAX_CONNECTIONS:
            return Overloaded(self._settings.retry_after, self._lingering, MAX_CONNECTIONS)
        return ClientConnection(self.dispatch, self._limits, self._connections)

    def dispatch(self, client: ClientConnection, req: LeanRequest) -> None:
        head = req.method == "HEAD"
        path = req.path
        if req.reject is not None:
            status, message = req.reject
            body, kind = jsonrpc_error_body(message, -32600), JSON
        elif path == PREFIX or path.startswith(PREFIX + "/"):
            query = dict(parse_qsl(req.path_and_query[1].decode("latin-1"), keep_blank_values=True))
            reply = authorize(req.method, path, req.text(b"authorization"), self._settings.admin_token_text)
            if reply is None:
                reply = self._admin.answer(req.method, path, query)
            log_call(client.remote, req.method, path, query, reply.status)
            status, body, kind = reply.status, reply.body, reply.content_type
        else:
            status, kind = 404, JSON
            body = jsonrpc_error_body(f"{path} is not an admin endpoint (they are under {PREFIX}/)", -32601)
        client.write(simple_response(status, body, kind, keep_alive=req.keep_alive, head=head))
        client.done(req)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in list(self._connections):
            conn.close()
