"""A small JSON-over-HTTP server on 127.0.0.1 in a background thread, for the ops tools' own endpoints.

The local cluster's control API (`mrtr_ops.local.control`) and the interop
run's vault helper (`mrtr_ops.interop.vault_helper`) are both one of these:
the standard library's threading server, a handler that answers JSON and
logs nothing (their owners' logs tell the story), started and stopped the
same way.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from mrtr_ops.local.process import LOOPBACK


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that reads a body and answers JSON, without the standard library's access log."""

    def _body(self) -> bytes:
        """The request body, as long as its Content-Length says (empty without one)."""
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the server's owner records what happened."""


class LoopbackServer:
    """Serves `handler` on 127.0.0.1 (`port`, or a free one with 0) from a daemon thread named `name`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, name: str, port: int = 0) -> None:
        self._server = ThreadingHTTPServer((LOOPBACK, port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() would wait forever for a loop that never started
            self._server.shutdown()
        self._server.server_close()
