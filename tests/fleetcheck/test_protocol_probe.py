"""Probe (e) against a server of the 2025 era, over real HTTP: it refuses a request without a session.

The server here stands for one built on an SDK before 2026-07-28 (it is the server under test, not a
part of this project): any request without `Mcp-Session-Id` gets 400, and `initialize` hands out a
session it keeps in memory.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from mrtr_fleet_check.probes import protocol_probe
from mrtr_fleet_check.verdict import SESSIONS_IN_MEMORY, Observations, Probe, ProbeResult, name_verdict

REFUSAL = "Bad Request: No valid session ID provided"


class SessionServer(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["method"] == "initialize":
            reply = {"jsonrpc": "2.0", "id": body["id"], "result": {"protocolVersion": "2025-06-18"}}
            self._send(200, reply, {"Mcp-Session-Id": "in-memory-1"})
        else:
            self._send(400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": REFUSAL}}, {})

    def _send(self, status: int, reply: object, headers: dict[str, str]) -> None:
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the probe's result, not the server's log."""


@pytest.fixture
def session_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), SessionServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    server.shutdown()
    thread.join()


def test_a_server_that_keeps_sessions_in_memory_is_named_with_its_refusal(session_server: str) -> None:
    with httpx.Client(timeout=10) as http:
        seen = protocol_probe(http, session_server)
    assert not seen.speaks_current
    assert seen.issues_sessions
    assert seen.message is not None
    assert REFUSAL in seen.message
    nothing = ProbeResult(Probe.NOT_APPLICABLE, "no call of the scenario handed back a requestState")
    named = name_verdict(Observations(seen, nothing, nothing, nothing, nothing))
    assert named.verdict == SESSIONS_IN_MEMORY
    assert REFUSAL in named.explanation
