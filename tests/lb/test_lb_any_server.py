"""The proxy in front of MCP servers that are not MRTR workers: two on the official SDK, which have no `/readyz`.

As a new user tries it (issue #38): `python -m mrtr_lb --backends ...` in front of two SDK server processes.
With the default check (the workers' `/readyz` contract) they are never in rotation; with
`MRTR_LB_HEALTH_CHECK=http` (the status line alone, even of `GET /mcp`, whose event stream never ends) or
`tcp` (a connect) they serve.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import httpx
import pytest

from mrtr_client import Client
from mrtr_lb.rules import no_backend
from mrtr_ops.local.process import LOOPBACK, ManagedProcess, free_port
from mrtr_ops.waiting import wait_until

pytestmark = pytest.mark.slow  # starts the servers and the proxy as processes

StartLB = Callable[..., tuple[str, str]]
"""Start the proxy in front of these backends with these env settings: its URL and its admin URL."""


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex((LOOPBACK, port)) == 0


@pytest.fixture(scope="module")
def sdk_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Two SDK servers (`tests/lb/sdk_server.py`) on uvicorn, each its own process."""
    log_dir = tmp_path_factory.mktemp("sdk-servers")
    started: list[tuple[subprocess.Popen[bytes], int]] = []
    try:
        for n in range(2):
            port = free_port()
            with (log_dir / f"sdk-{n}.log").open("wb") as log:
                argv = [sys.executable, "-m", "uvicorn", "tests.lb.sdk_server:app", "--host", LOOPBACK]
                process = subprocess.Popen([*argv, "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
            started.append((process, port))
        for process, port in started:
            wait_until(partial(_accepts, port), timeout=60, what=f"the SDK server on {port}")
            assert process.poll() is None
        yield [f"http://{LOOPBACK}:{port}" for _, port in started]
    finally:
        for process, _ in started:
            process.terminate()
            process.wait(timeout=15)


@pytest.fixture
def start_lb(tmp_path: Path) -> Iterator[StartLB]:
    started: list[ManagedProcess] = []

    def start(backends: list[str], **env: str) -> tuple[str, str]:
        port, admin_port = free_port(), free_port()
        clean = {k: v for k, v in os.environ.items() if not k.startswith("MRTR_LB_")}
        process = ManagedProcess(
            name="lb",
            argv=[sys.executable, "-m", "mrtr_lb", "--backends", ",".join(backends)],
            env={**clean, "MRTR_LB_PORT": str(port), "MRTR_LB_ADMIN_PORT": str(admin_port), **env},
            log_path=tmp_path / "lb.log",
            ready_url=f"http://{LOOPBACK}:{admin_port}/lb/healthz",
        ).start()
        started.append(process)
        process.wait_ready(timeout=60)
        return f"http://{LOOPBACK}:{port}", f"http://{LOOPBACK}:{admin_port}"

    yield start
    for process in started:
        process.stop()


def _eligible(admin_url: str) -> int:
    return int(httpx.get(f"{admin_url}/lb/healthz", timeout=5).json()["eligible"])


def test_the_workers_readiness_contract_keeps_an_sdk_server_out(sdk_servers: list[str], start_lb: StartLB) -> None:
    url, admin_url = start_lb(sdk_servers)
    assert _eligible(admin_url) == 0  # the first round of checks ran before the listener opened: 404 on /readyz
    answer = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
    assert answer.status_code == 503
    assert answer.json()["error"]["message"] == no_backend(0)


@pytest.mark.parametrize(
    "check",
    [
        {"MRTR_LB_HEALTH_CHECK": "http", "MRTR_LB_HEALTH_PATH": "/mcp"},  # a stream that never ends: status alone
        {"MRTR_LB_HEALTH_CHECK": "http"},  # /readyz answers 404: an answer under 500 is a server that serves
        {"MRTR_LB_HEALTH_CHECK": "tcp"},
    ],
    ids=["http-on-mcp", "http-404", "tcp"],
)
def test_a_health_check_for_any_server_puts_sdk_servers_in_rotation(
    check: dict[str, str],
    sdk_servers: list[str],
    start_lb: StartLB,
) -> None:
    url, admin_url = start_lb(sdk_servers, **check)
    assert _eligible(admin_url) == 2
    with Client(f"{url}/mcp") as mcp:
        results = [mcp.call_tool("echo", {"text": f"hi {n}"}).structured for n in range(4)]
    assert results == [{"result": f"hi {n}"} for n in range(4)]
