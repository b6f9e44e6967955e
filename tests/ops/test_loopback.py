"""The loopback JSON server the ops tools' own endpoints share (`mrtr_ops.local.loopback`), in process."""

from __future__ import annotations

import json

import httpx
import pytest

from mrtr_ops.local.loopback import JsonHandler, LoopbackServer


class _Echo(JsonHandler):
    def do_POST(self) -> None:
        try:
            sent = json.loads(self._body())
        except ValueError:
            self._reply(400, {"error": "not JSON"})
            return
        self._reply(200, {"path": self.path, "sent": sent})


def test_it_serves_json_on_loopback_until_stopped() -> None:
    server = LoopbackServer(_Echo, name="echo").start()
    try:
        assert server.url.startswith("http://127.0.0.1:")
        answer = httpx.post(f"{server.url}/here", json={"n": 1})
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "application/json"
        assert answer.json() == {"path": "/here", "sent": {"n": 1}}
        bad = httpx.post(server.url, content=b"{")
        assert (bad.status_code, bad.json()) == (400, {"error": "not JSON"})
    finally:
        server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.post(server.url, json={})


def test_a_server_never_started_stops_at_once() -> None:
    server = LoopbackServer(_Echo, name="idle")
    server.stop()  # ThreadingHTTPServer.shutdown() alone would wait forever for a loop that never ran
    with pytest.raises(httpx.ConnectError):
        httpx.post(server.url, json={})
