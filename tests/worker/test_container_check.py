"""The image's HEALTHCHECK command against real HTTP answers: ready, stepping aside, draining, broken, gone."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mrtr_worker.container_check import well

ANSWERS: dict[str, tuple[int, bytes]] = {
    "/ready": (200, json.dumps({"ready": True, "slow": False}).encode()),
    "/aside": (429, json.dumps({"ready": False, "slow": True}).encode()),
    "/aside-quiet": (429, b""),  # the status alone says it
    "/draining": (503, json.dumps({"ready": False, "slow": False}).encode()),
    "/draining-saying-slow": (503, json.dumps({"ready": False, "slow": True}).encode()),  # the body is not read
    "/garbled": (503, b"<html>busy</html>"),
    "/broken": (500, json.dumps({"slow": True}).encode()),
}


class _Readyz(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status, body = ANSWERS[self.path]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Readyz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/ready", True),
        ("/aside", True),  # asks the proxy to skip it: the container is well, not to be replaced
        ("/aside-quiet", True),
        ("/draining", False),
        ("/draining-saying-slow", False),
        ("/garbled", False),
        ("/broken", False),
    ],
)
def test_only_ready_or_stepping_aside_is_well(base: str, path: str, expected: bool) -> None:
    assert well(base + path) is expected


def test_a_worker_that_does_not_answer_is_not_well(base: str) -> None:
    assert well("http://127.0.0.1:9/readyz", timeout=2) is False


def test_the_command_exits_as_the_image_checks_it(base: str) -> None:
    def run(path: str) -> int:
        command = [sys.executable, "-m", "mrtr_worker.container_check", base + path]
        return subprocess.run(command, check=False, timeout=30).returncode

    assert (run("/aside"), run("/draining")) == (0, 1)
